# frozen_string_literal: true

# Stops a workflow's turn (the user pressed stop): POST /internal/workflows/:id/stop with
# the owner's JWT (docs/owner-integration.md §6).
#
#   202  the run in flight, on whichever replica, stops within seconds; its callback says
#        stop_requested and ends the turn
#   409  NOT_CANCELLABLE: no run in flight. The turn is marked stopping first, so whatever
#        comes next ends it instead of going on: the segment job about to dispatch, a
#        callback on its way (a run that ended just now), or the 202 of a dispatch in
#        flight (that run is stopped in turn, TurnFlow.accepted)
class StopJob
  include TinyQueue::Job # include Sidekiq::Job

  sidekiq_options retry: 5

  sidekiq_retry_in do |count, error|
    after = error.respond_to?(:retry_after_s) ? error.retry_after_s : nil
    after || [0.2 * (2**count), 5].min
  end

  def perform(workflow_id, reason = nil)
    turn = App.turns.request_stop(workflow_id, reason)
    return App.log('stop_skipped', workflow_id: workflow_id, why: 'no open turn') unless turn

    answer = App.client.stop(workflow_id, reason: reason)
    App.log('stop_answered', workflow_id: workflow_id, answer: answer.to_s, run_id: turn.run_id)
  rescue Longrun::Error => e
    App.log('stop_error', workflow_id: workflow_id, code: e.code, status: e.status, will_retry: e.retryable?)
    raise if e.retryable?
  end
end
