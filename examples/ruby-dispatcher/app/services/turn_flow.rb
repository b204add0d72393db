# frozen_string_literal: true

# What happens once a run is known to be the turn's, or once its end is: shared by the
# segment job (a 202, a 200, an adopted run) and the segment-end callback, which may come
# in either order (docs/owner-integration.md §3).
module TurnFlow
  module_function

  # `run_id` is the segment of the turn that resumes `after_run_id` (nil: its first).
  # `adopted`: found through 409 WORKFLOW_LOCKED and #run, not started by this job.
  def accepted(workflow_id, run_id, after_run_id:, adopted:)
    case App.turns.accept_run(workflow_id, run_id, after_run_id: after_run_id)
    when :accepted
      turn = App.turns.find(workflow_id)
      App.log('accepted', workflow_id: workflow_id, run_id: run_id, after_run_id: after_run_id, segment: turn.segments,
                          adopted: adopted)
      # The owner's stop came while this segment was being dispatched and found no run
      # (409 NOT_CANCELLABLE): this run is the one to stop.
      StopJob.perform_async(workflow_id, turn.stop_reason) if turn.status == 'stopping'
      # Its callback may be lost: look at it well before GitLab's 30-minute cleanup.
      WatchdogJob.perform_in(App.watch_period_s, workflow_id, run_id)
    when :stale
      App.log('accepted_stale', workflow_id: workflow_id, run_id: run_id, after_run_id: after_run_id)
    end
    # Its callback may have come before its 202.
    advance(workflow_id, run_id)
  end

  # `run_id` ended with `reason` (its callback, or an execute's 200). Idempotent per run.
  def ended(workflow_id, run_id, reason:, in_flight:, ended_while_stopping:, via:)
    if App.turns.record_end(workflow_id, run_id, reason: reason, in_flight: in_flight, ended_while_stopping: ended_while_stopping)
      # ended_while_stopping: longrun's stop crossed the service's own OK end. Rails would
      # look at the workflow's own status first and record the end if it is over; resuming
      # anyway costs one call the service answers harmlessly (docs/owner-integration.md §3).
      App.log('segment_ended', workflow_id: workflow_id, run_id: run_id, reason: reason, in_flight: in_flight,
                               ended_while_stopping: ended_while_stopping, via: via)
    else
      App.log('segment_end_repeated', workflow_id: workflow_id, run_id: run_id, via: via)
    end
    advance(workflow_id, run_id)
  end

  # Acts on `run_id`'s recorded end once: the next segment, or the turn's end.
  def advance(workflow_id, run_id)
    step = App.turns.take_next(workflow_id, run_id)
    case step&.first
    when :resume
      SegmentJob.perform_async(workflow_id, run_id)
      App.log('resume_enqueued', workflow_id: workflow_id, after_run_id: run_id, reason: step[1].reason,
                                 in_flight: step[1].in_flight)
    when :final
      App.log('turn_ended', workflow_id: workflow_id, status: step[1], reason: step[2])
    end
  end

  # Ends the turn without a run's end (refused, stopped before acceptance, given up).
  def finish(workflow_id, status, reason)
    step = App.turns.finish(workflow_id, status, reason)
    App.log('turn_ended', workflow_id: workflow_id, status: step[1], reason: step[2]) if step
  end
end
