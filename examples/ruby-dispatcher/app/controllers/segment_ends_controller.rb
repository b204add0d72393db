# frozen_string_literal: true

# POST /api/v4/internal/ai/duo_workflows/workflows/:id/segment_end: longrun's callback at
# the end of every accepted detached run (docs/owner-integration.md §3).
#
#   401  the Gitlab-Workhorse-Api-Request JWT does not verify (longrun does not retry a 4xx)
#   400  the body is not a segment end, or names another workflow than the path
#   204  recorded and acted on: the next segment enqueued (once per run), or the turn ended
#   503  could not act (the database is down): longrun tries again, 3 attempts in all
#
# longrun retries on 5xx, 429 and network errors, so the same run's end may come twice;
# it may also come before the 202 that started the run was recorded. Both are handled by
# the model (Turns): the end is recorded once, and acted on once the run is the turn's.
class SegmentEndsController
  ROUTE = %r{\A/api/v4/internal/ai/duo_workflows/workflows/([^/]+)/segment_end\z}

  # The router: [status, body] for a TinyHttp::Request.
  def self.call(request)
    match = ROUTE.match(request.path)
    return [404, '{"message":"404 Not Found"}'] unless match && request.method == 'POST'

    new.create(match[1].gsub(/%(\h\h)/) { Regexp.last_match(1).hex.chr }, request)
  end

  def create(workflow_id, request)
    Longrun::Jwt.verify_gateway_token(App.secret, request.headers['gitlab-workhorse-api-request'])
    segment_end = Longrun::SegmentEnd.parse(request.body, path_workflow_id: workflow_id)
    TurnFlow.ended(workflow_id, segment_end.run_id, reason: segment_end.reason, in_flight: segment_end.in_flight,
                                                    ended_while_stopping: segment_end.ended_while_stopping, via: 'callback')
    [204, '']
  rescue Longrun::Jwt::Invalid => e
    App.log('callback_rejected', workflow_id: workflow_id, status: 401, why: e.message)
    [401, '{"message":"401 Unauthorized"}']
  rescue Longrun::SegmentEnd::Invalid => e
    App.log('callback_rejected', workflow_id: workflow_id, status: 400, why: e.message)
    [400, JSON.generate(message: e.message)]
  rescue StandardError => e
    App.log('callback_failed', workflow_id: workflow_id, error: "#{e.class}: #{e.message}")
    [503, '{"message":"could not record the segment end; try again"}']
  end
end
