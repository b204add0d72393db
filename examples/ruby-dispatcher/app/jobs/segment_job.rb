# frozen_string_literal: true

require 'securerandom'

# Dispatches one segment of a workflow's turn: the first (after_run_id nil), or the one
# that resumes after run `after_run_id` ended resumable (docs/owner-integration.md §2).
#
#   202 accepted           the run is the turn's current segment; its end comes as a callback
#   200 finished           the turn ended before acceptance; no callback follows
#   409 WORKFLOW_LOCKED    a run holds the workflow: it is the turn (our own, whose 202 was
#                          lost); read it with GET …/run and adopt it, never a failure
#   409 STOPPED            the owner's stop came first: the turn is over
#   429, 503 (and 502, 500, no answer)
#                          raised, so the job is retried after the answer's Retry-After
#                          (sidekiq_retry_in below), or a short backoff without one
#   400, 403, other refusals
#                          the turn cannot run: it fails
#
# Retrying is safe: nothing runs unless it was accepted, and a retry of an accepted
# execute finds the lock (409) and adopts the run.
class SegmentJob
  include TinyQueue::Job # include Sidekiq::Job

  # Enough retries to outlast a lock that outlives its run (one lease, 60 s by default).
  sidekiq_options retry: 12

  # Raised to be tried again, after `retry_after_s` or the backoff when nil.
  class RetryLater < StandardError
    attr_reader :retry_after_s

    def initialize(message, retry_after_s: nil)
      super(message)
      @retry_after_s = retry_after_s
    end
  end

  # Retry-After when the answer had one (longrun's 503 and 429, or the owner's passed
  # through it), plus up to 20 % so that retries spread; else 0.2 s doubling to 10 s.
  sidekiq_retry_in do |count, error|
    after = error.respond_to?(:retry_after_s) ? error.retry_after_s : nil
    after ? after * (1 + (rand * 0.2)) : [0.2 * (2**count), 10].min
  end

  sidekiq_retries_exhausted do |job, error|
    TurnFlow.finish(job['args'][0], 'failed', error.respond_to?(:code) ? error.code : 'dispatch_failed')
  end

  def perform(workflow_id, after_run_id = nil)
    turn = App.turns.find(workflow_id)
    return skip(workflow_id, 'the turn has ended') unless turn&.open?
    # This segment was dispatched already, or another run was adopted.
    return skip(workflow_id, "the turn waits on run #{turn.run_id.inspect}") unless turn.run_id == after_run_id
    return TurnFlow.finish(workflow_id, 'stopped', 'stop_requested') if turn.status == 'stopping'
    # A turn that never progresses (a stream that keeps failing) must not loop for ever.
    return TurnFlow.finish(workflow_id, 'failed', 'too_many_segments') if turn.segments >= App.max_segments

    dispatch(turn, after_run_id)
  rescue Longrun::Error => e
    App.log('dispatch_error', workflow_id: workflow_id, code: e.code, status: e.status, retry_after_s: e.retry_after_s,
                              will_retry: e.retryable?, message: e.message)
    raise if e.retryable?

    TurnFlow.finish(workflow_id, 'failed', e.code)
  end

  private

  def dispatch(turn, after_run_id)
    workflow_id = turn.workflow_id
    # The next segment resumes from the latest checkpoint with no new input (an empty
    # goal), told why the last one ended and which of its actions are of unknown outcome:
    # a write among them may have happened; the service checks before repeating it.
    metadata = turn.metadata
    if after_run_id
      run_end = App.turns.find_end(workflow_id, after_run_id)
      resume = { 'after_run_id' => after_run_id, 'reason' => run_end.reason, 'in_flight' => run_end.in_flight }
      metadata = metadata.merge('resume' => resume)
    end
    # One per attempt, of longrun's form (^[A-Za-z0-9_-]{1,64}$): it follows the segment
    # through longrun's, the owner's and the workflow service's logs.
    request_id = "#{workflow_id.gsub(/[^A-Za-z0-9_-]/, '_')}-s#{turn.segments}-#{SecureRandom.alphanumeric(6)}"
    request_id = request_id[-64, 64] if request_id.length > 64
    App.log('dispatching', workflow_id: workflow_id, after_run_id: after_run_id, request_id: request_id)

    goal = after_run_id ? '' : turn.goal
    result = App.client.execute(workflow_id, goal: goal, workflow_metadata: metadata, request_id: request_id)
    case result
    when Longrun::Client::Accepted
      TurnFlow.accepted(workflow_id, result.run_id, after_run_id: after_run_id, adopted: false)
    when Longrun::Client::Finished
      TurnFlow.accepted(workflow_id, result.run_id, after_run_id: after_run_id, adopted: false)
      TurnFlow.ended(workflow_id, result.run_id, reason: 'finished', in_flight: [], ended_while_stopping: false, via: 'execute')
    when Longrun::Client::Locked
      adopt(workflow_id, after_run_id)
    when Longrun::Client::Stopped
      TurnFlow.finish(workflow_id, 'stopped', 'stop_requested')
    when Longrun::Client::Streaming
      # The owner's preauth did not answer Detached: a job cannot hold a turn open.
      TurnFlow.finish(workflow_id, 'failed', 'not_detached')
    end
  end

  # 409 WORKFLOW_LOCKED: the run in flight is the turn.
  def adopt(workflow_id, after_run_id)
    record = App.client.run(workflow_id)
    raise RetryLater, '409 WORKFLOW_LOCKED, then no run in flight' unless record
    # Its lock outlived the run this segment resumes (its release failed): it expires
    # within one lease; until then, try again.
    raise RetryLater, 'the run this segment resumes still holds the lock' if record['run_id'] == after_run_id

    App.log('adopting', workflow_id: workflow_id, run_id: record['run_id'], replica: record['replica'],
                        in_flight: record['in_flight'] || [])
    TurnFlow.accepted(workflow_id, record['run_id'], after_run_id: after_run_id, adopted: true)
  end

  def skip(workflow_id, why)
    App.log('job_skipped', workflow_id: workflow_id, why: why)
  end
end
