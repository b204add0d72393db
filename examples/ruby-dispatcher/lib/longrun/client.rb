# frozen_string_literal: true

require 'json'
require 'net/http'
require 'securerandom'
require 'uri'
require_relative 'error'
require_relative 'jwt'

module Longrun
  # What the owner calls on longrun, over net/http (docs/owner-integration.md §2, §5, §6):
  #
  #   execute  POST /api/v4/ai/duo_workflows/workflows/:id/execute  one segment of a turn
  #   stop     POST /internal/workflows/:id/stop                     owner JWT
  #   run      GET  /internal/workflows/:id/run                      owner JWT
  #
  # One attempt per call: retrying belongs to the job (Sidekiq's retries, honouring
  # Retry-After), not to a loop inside it. Failures raise Longrun::Error.
  class Client
    # 202: the run is the turn's current segment; its end comes as a segment-end callback.
    Accepted = Struct.new(:run_id, :accepted_on, :request_id, keyword_init: true)
    # 200 JSON: the turn ended before it was accepted; no callback follows.
    Finished = Struct.new(:run_id, :request_id, keyword_init: true)
    # 409 WORKFLOW_LOCKED: another run holds the workflow; it is the turn (read it with #run).
    Locked = Struct.new(:retry_after_s, :request_id, keyword_init: true)
    # 409 STOPPED: the owner's stop arrived before acceptance; the turn is over.
    Stopped = Struct.new(:request_id, keyword_init: true)
    # 200 ndjson: the owner's preauth chose blocking mode; a job cannot hold a turn open.
    Streaming = Struct.new(:request_id, keyword_init: true)

    NETWORK_ERRORS = [SystemCallError, IOError, EOFError, SocketError, Timeout::Error, OpenSSL::SSL::SSLError].freeze

    # `url`: the gateway's base URL; `secret`: the 32 bytes of the Workhorse secret file.
    # `read_timeout_s` covers a detached accept, which waits up to 10 s for the first action.
    def initialize(url:, secret:, open_timeout_s: 5, read_timeout_s: 30)
      @base = URI(url)
      @secret = secret
      @open_timeout_s = open_timeout_s
      @read_timeout_s = read_timeout_s
    end

    # Starts (or resumes) a turn of `workflow_id`: one of the results above, or raises.
    # `goal` nil leaves it out; a resume sends "" (no new input) and the same metadata.
    def execute(workflow_id, goal:, workflow_metadata:, request_id: SecureRandom.uuid)
      body = { workflowMetadata: JSON.generate(workflow_metadata) }
      body[:goal] = goal unless goal.nil?
      request = Net::HTTP::Post.new(path('/api/v4/ai/duo_workflows/workflows', workflow_id, 'execute'), headers(request_id))
      request['Content-Type'] = 'application/json'
      request.body = JSON.generate(body)
      call(request, request_id) do |response, answered_id|
        case response.code.to_i
        when 202
          json = JSON.parse(response.body)
          Accepted.new(run_id: json.fetch('run_id'), accepted_on: json['accepted_on'], request_id: answered_id)
        when 200
          next Streaming.new(request_id: answered_id) if ndjson?(response)

          Finished.new(run_id: JSON.parse(response.body).fetch('run_id'), request_id: answered_id)
        else
          error = Error.from_response(response, answered_id)
          case error.code
          when 'WORKFLOW_LOCKED' then Locked.new(retry_after_s: error.retry_after_s, request_id: answered_id)
          when 'STOPPED' then Stopped.new(request_id: answered_id)
          else raise error
          end
        end
      end
    end

    # Asks the run in flight of `workflow_id`, on whichever replica, to stop. :stop_requested
    # (202: its callback will say stop_requested) or :not_cancellable (409: no run in flight).
    def stop(workflow_id, reason: nil, request_id: SecureRandom.uuid)
      request = Net::HTTP::Post.new(path('/internal/workflows', workflow_id, 'stop'), owner_headers(workflow_id, request_id))
      if reason
        request['Content-Type'] = 'application/json'
        request.body = JSON.generate(reason: reason)
      end
      call(request, request_id) do |response, answered_id|
        next :stop_requested if response.code.to_i == 202

        error = Error.from_response(response, answered_id)
        raise error unless error.code == 'NOT_CANCELLABLE'

        :not_cancellable
      end
    end

    # The record of the run in flight (a Hash: run_id, replica, state, in_flight…), or nil.
    def run(workflow_id, request_id: SecureRandom.uuid)
      request = Net::HTTP::Get.new(path('/internal/workflows', workflow_id, 'run'), owner_headers(workflow_id, request_id))
      call(request, request_id) do |response, answered_id|
        next JSON.parse(response.body) if response.code.to_i == 200

        error = Error.from_response(response, answered_id)
        raise error unless error.code == 'NOT_FOUND'

        nil
      end
    end

    private

    def path(prefix, workflow_id, action)
      "#{@base.path.chomp('/')}#{prefix}/#{escape(workflow_id.to_s)}/#{action}"
    end

    # Percent-encodes a path segment (URI.encode_www_form_component would write a space as '+').
    def escape(segment)
      segment.b.gsub(/[^A-Za-z0-9_.~-]/n) { |byte| format('%%%02X', byte.ord) }
    end

    def headers(request_id)
      { 'X-Request-Id' => request_id, 'User-Agent' => 'longrun-ruby-dispatcher' }
    end

    # Signed per call: one workflow, one minute.
    def owner_headers(workflow_id, request_id)
      headers(request_id).merge('Authorization' => "Bearer #{Jwt.owner_token(@secret, workflow_id)}")
    end

    # Sends `request` on a connection of its own and yields the answer with the request id
    # the gateway used. A blocking stream is never read: the connection is closed instead.
    def call(request, request_id)
      options = { use_ssl: @base.scheme == 'https', open_timeout: @open_timeout_s, read_timeout: @read_timeout_s }
      Net::HTTP.start(@base.host, @base.port, **options) do |http|
        catch(:streaming) do
          http.request(request) do |response|
            answered_id = response['x-request-id'] || request_id
            # Leaving the block unread would read the whole stream; leaving Net::HTTP.start closes it.
            throw :streaming, yield(response, answered_id) if ndjson?(response)

            response.read_body
            return yield(response, answered_id)
          end
        end
      end
    rescue *NETWORK_ERRORS => e
      raise Error.new('NETWORK_ERROR', "#{request.method} #{request.path}: #{e.class}: #{e.message}",
                      retryable: true, request_id: request_id)
    rescue JSON::ParserError, KeyError => e
      # A success whose body is not longrun's: the request was served, so not retried.
      raise Error.new('UNEXPECTED_RESPONSE', "#{request.method} #{request.path}: unreadable answer: #{e.message}",
                      request_id: request_id)
    end

    def ndjson?(response)
      response['content-type'].to_s.split(';').first.to_s.strip.casecmp?('application/x-ndjson')
    end
  end
end
