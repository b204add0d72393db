# frozen_string_literal: true

require 'json'
require 'time'

module Longrun
  # A call to longrun that failed (docs/errors.md): its stable `code`, the HTTP `status`
  # (nil when nothing answered), whether trying again may succeed, and the `Retry-After`
  # the answer carried, in seconds.
  class Error < StandardError
    attr_reader :code, :status, :retry_after_s, :request_id

    # Answers a proxy in front of the gateway gives for an upstream that is down or restarting.
    TRANSIENT_STATUSES = [502, 503, 504].freeze
    # An owner's refusal (PREAUTH_DENIED, passed through with its status and headers) that
    # asks to come back later: its rate limit, its maintenance.
    OWNER_LATER_STATUSES = [429, 502, 503, 504].freeze

    def initialize(code, message, status: nil, retryable: false, retry_after_s: nil, request_id: nil)
      super(message)
      @code = code
      @status = status
      @retryable = retryable
      @retry_after_s = retry_after_s
      @request_id = request_id
    end

    def retryable?
      @retryable
    end

    # The error an answer that is not a success stands for.
    def self.from_response(response, request_id)
      status = response.code.to_i
      retry_after_s = retry_after_of(response['retry-after'])
      common = { status: status, retry_after_s: retry_after_s, request_id: response['x-request-id'] || request_id }
      if response['x-longrun-error-code'] == 'PREAUTH_DENIED'
        return new('PREAUTH_DENIED', "the owner refused the request (#{status})",
                   retryable: OWNER_LATER_STATUSES.include?(status), **common)
      end

      error = begin
        JSON.parse(response.body.to_s)['error']
      rescue JSON::ParserError, TypeError
        nil
      end
      if error.is_a?(Hash) && error['code'].is_a?(String)
        new(error['code'], error['message'].to_s, retryable: error['retryable'] == true, **common)
      else
        new('UNEXPECTED_RESPONSE', "unexpected answer #{status}", retryable: TRANSIENT_STATUSES.include?(status), **common)
      end
    end

    # Retry-After in seconds: delta-seconds, or an HTTP date (seconds from now, at least 0).
    def self.retry_after_of(value)
      return nil if value.nil? || value.strip.empty?
      return Integer(value.strip, 10) if value.strip.match?(/\A\d+\z/)

      [(Time.httpdate(value.strip) - Time.now).ceil, 0].max
    rescue ArgumentError
      nil
    end
  end
end
