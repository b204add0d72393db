# frozen_string_literal: true

# The owner's record of each workflow's turn and of each run's end. STAND-IN FOR TWO
# ACTIVERECORD TABLES, in memory behind one mutex: in Rails, `turns` (one row per
# workflow, changed under `turn.with_lock`) and `segment_ends` (a unique index on
# workflow_id, run_id, so that the same callback recorded twice is one row).
#
# Each method is one transaction. The job, the callback and the stop may race on a turn;
# each step still happens once: a run is accepted into the turn once, its end recorded
# once and acted on once (one resume per boundary, docs/owner-integration.md §3).
class Turns
  STATUSES = %w[dispatching running stopping finished stopped failed].freeze
  OPEN = %w[dispatching running stopping].freeze

  Turn = Struct.new(:workflow_id, :status, :goal, :metadata, :run_id, :segments, :boundaries, :resumes, :ended_reason,
                    :stop_reason, keyword_init: true) do
    def open?
      OPEN.include?(status)
    end
  end

  # A run's end, from its callback (or an execute's 200). `acted`: the turn moved on from it.
  RunEnd = Struct.new(:reason, :in_flight, :ended_while_stopping, :acted, keyword_init: true)

  def initialize
    @turns = {}
    @ends = {}
    @lock = Mutex.new
  end

  # A copy of the turn (nil when none), safe to read outside the lock.
  def find(workflow_id)
    @lock.synchronize { @turns[workflow_id]&.dup }
  end

  # Yields a copy of every turn.
  def each(&block)
    @lock.synchronize { @turns.values.map(&:dup) }.each(&block)
  end

  # A copy of run `run_id`'s recorded end, or nil.
  def find_end(workflow_id, run_id)
    @lock.synchronize { @ends[[workflow_id, run_id]]&.dup }
  end

  # Opens a turn; false when one is open already.
  def start(workflow_id, goal:, metadata:)
    @lock.synchronize do
      return false if @turns[workflow_id]&.open?

      @turns[workflow_id] = Turn.new(workflow_id: workflow_id, status: 'dispatching', goal: goal, metadata: metadata,
                                     run_id: nil, segments: 0, boundaries: 0, resumes: 0)
      true
    end
  end

  # Makes `run_id` the turn's current segment, if the turn still waits on `after_run_id` (the
  # run it resumes, nil for its first). :accepted, :known (this run is the turn's already)
  # or :stale (the turn moved on, or ended).
  def accept_run(workflow_id, run_id, after_run_id:)
    @lock.synchronize do
      turn = @turns[workflow_id]
      return :known if turn&.run_id == run_id
      return :stale unless turn&.open? && turn.run_id == after_run_id

      turn.run_id = run_id
      turn.segments += 1
      turn.resumes += 1 unless after_run_id.nil?
      turn.status = 'running' if turn.status == 'dispatching'
      :accepted
    end
  end

  # Records how `run_id` ended — also for a run the turn does not know yet (its callback
  # can beat its 202). True the first time, false for a repeat.
  def record_end(workflow_id, run_id, reason:, in_flight:, ended_while_stopping: false)
    @lock.synchronize do
      key = [workflow_id, run_id]
      return false if @ends.key?(key)

      @ends[key] = RunEnd.new(reason: reason, in_flight: in_flight, ended_while_stopping: ended_while_stopping, acted: false)
      true
    end
  end

  # What follows `run_id`'s recorded end, decided once: [:resume, run_end] (the next segment
  # is to be dispatched), [:final, status, reason] (the turn is over), or nil (the end is
  # not recorded yet, is not the turn's current run's, or was acted on already).
  def take_next(workflow_id, run_id)
    @lock.synchronize do
      turn = @turns[workflow_id]
      run_end = @ends[[workflow_id, run_id]]
      return nil unless turn&.open? && turn.run_id == run_id && run_end && !run_end.acted

      run_end.acted = true
      if run_end.reason == 'finished'
        close(turn, 'finished', 'finished')
      elsif run_end.reason == 'stop_requested' || turn.status == 'stopping'
        # The owner asked to stop: a segment cut for another reason meanwhile is not resumed.
        close(turn, 'stopped', 'stop_requested')
      else
        turn.boundaries += 1
        turn.status = 'dispatching'
        [:resume, run_end.dup]
      end
    end
  end

  # Marks an open turn as being stopped with `reason` (its next dispatch will not happen);
  # the turn, or nil.
  def request_stop(workflow_id, reason)
    @lock.synchronize do
      turn = @turns[workflow_id]
      return nil unless turn&.open?

      turn.status = 'stopping'
      turn.stop_reason = reason
      turn.dup
    end
  end

  # Ends an open turn; [:final, status, reason], or nil when it had ended already.
  def finish(workflow_id, status, reason)
    @lock.synchronize do
      turn = @turns[workflow_id]
      turn&.open? ? close(turn, status, reason) : nil
    end
  end

  private

  def close(turn, status, reason)
    turn.status = status
    turn.ended_reason = reason
    [:final, status, reason]
  end
end
