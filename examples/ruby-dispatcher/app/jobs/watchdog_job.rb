# frozen_string_literal: true

# Watches a run believed in flight, for a lost segment-end callback (docs/owner-integration.md
# §5): scheduled when a run becomes the turn's, then again every App.watch_period_s while it
# lives. A callback can be lost (the replica was killed, the owner was down for all three
# attempts), and GitLab fails a workflow left `running` for 30 minutes without an update
# (Ai::DuoWorkflows::CleanStuckWorkflowsService): waiting for the run limit, then a
# re-dispatch the owner may rate-limit for minutes, could lose the turn. It reads
# GET /internal/workflows/:id/run:
#
#   the turn moved on, or the run's end is known   nothing to do (no more looks)
#   this run's record                              alive: look again after the period
#   no record, or another run's                    gone: its callback may still be on its way
#                                                  (longrun releases the lock, then calls
#                                                  back), so look again after
#                                                  App.lost_confirm_s; gone still → its end
#                                                  is recorded as `lost` and the next segment
#                                                  dispatched, as the callback would have
#   an error (longrun or its Redis down)           look again after the period
#
# The confirmation outlasts the callback's budget (about 6.4 s) and one lease (60 s): after
# longrun's Redis lost its data, a live run's record is missing until its next renewal.
class WatchdogJob
  include TinyQueue::Job # include Sidekiq::Job

  sidekiq_options retry: 3

  # `absent_since` (epoch seconds): when the run was first found gone.
  def perform(workflow_id, run_id, absent_since = nil)
    turn = App.turns.find(workflow_id)
    return unless turn&.open? && turn.run_id == run_id
    return if App.turns.find_end(workflow_id, run_id)

    begin
      record = App.client.run(workflow_id)
    rescue Longrun::Error => e
      App.log('watchdog', workflow_id: workflow_id, run_id: run_id, finding: 'unknown', code: e.code)
      return WatchdogJob.perform_in(App.watch_period_s, workflow_id, run_id)
    end
    if record && record['run_id'] == run_id
      App.log('watchdog', workflow_id: workflow_id, run_id: run_id, finding: 'alive')
      return WatchdogJob.perform_in(App.watch_period_s, workflow_id, run_id)
    end

    now = Time.now.to_f
    absent_since ||= now
    if now - absent_since < App.lost_confirm_s
      App.log('watchdog', workflow_id: workflow_id, run_id: run_id, finding: 'absent')
      return WatchdogJob.perform_in(App.lost_confirm_s - (now - absent_since), workflow_id, run_id, absent_since)
    end

    App.log('watchdog', workflow_id: workflow_id, run_id: run_id, finding: 'lost')
    TurnFlow.ended(workflow_id, run_id, reason: 'lost', in_flight: [], ended_while_stopping: false, via: 'watchdog')
  end
end
