# frozen_string_literal: true

require 'json'

module Longrun
  # The body of a segment-end callback (docs/spec.md §6, docs/owner-integration.md §3, §4):
  #
  #   {"workflow_id":"42","run_id":"…","reason":"run_limit","segment_duration_s":3300.2,"actions":517,
  #    "in_flight":[{"kind":"http","request_id":"88","method":"POST"}]}
  #
  # plus "ended_while_stopping": true when longrun's stop crossed the service's own end.
  # Checked as strictly as longrun's own client checks it (its segment-end.ts schema).
  SegmentEnd = Struct.new(:workflow_id, :run_id, :reason, :segment_duration_s, :actions, :in_flight, :ended_while_stopping,
                          keyword_init: true) do
    # The workflow is still running: the owner dispatches the next segment, once.
    def resumable?
      RESUMABLE_REASONS.include?(reason)
    end

    # The turn is over: the owner records it and dispatches nothing.
    def final?
      FINAL_REASONS.include?(reason)
    end
  end

  class SegmentEnd
    RESUMABLE_REASONS = %w[run_limit drain lock_lost stream_error workflow_unavailable].freeze
    FINAL_REASONS = %w[finished stop_requested].freeze
    IN_FLIGHT_KINDS = %w[http mcp].freeze

    # A body that is not a segment end (the endpoint answers 400, which longrun does not retry).
    class Invalid < StandardError; end

    # Parses and checks the raw body; `path_workflow_id` must be the body's workflow_id.
    def self.parse(raw, path_workflow_id:)
      json = begin
        JSON.parse(raw.to_s)
      rescue JSON::ParserError
        raise Invalid, 'body is not JSON'
      end
      raise Invalid, 'body is not an object' unless json.is_a?(Hash)

      check = lambda do |name, ok|
        raise Invalid, "#{name}: #{json[name].inspect}" unless ok.call(json[name])
      end
      check.call('workflow_id', ->(v) { v.is_a?(String) && !v.empty? })
      check.call('run_id', ->(v) { v.is_a?(String) && !v.empty? })
      check.call('reason', ->(v) { (RESUMABLE_REASONS + FINAL_REASONS).include?(v) })
      check.call('segment_duration_s', ->(v) { v.is_a?(Numeric) && v >= 0 })
      check.call('actions', ->(v) { v.is_a?(Integer) && v >= 0 })
      # Gateways from before in_flight do not send it: nothing known to be in flight.
      check.call('in_flight', ->(v) { v.nil? || (v.is_a?(Array) && v.all? { |e| in_flight_entry?(e) }) })
      check.call('ended_while_stopping', ->(v) { v.nil? || v == true || v == false })
      raise Invalid, 'body workflow_id differs from the path' unless json['workflow_id'] == path_workflow_id

      new(
        workflow_id: json['workflow_id'],
        run_id: json['run_id'],
        reason: json['reason'],
        segment_duration_s: json['segment_duration_s'],
        actions: json['actions'],
        in_flight: (json['in_flight'] || []).map { |e| e.slice('kind', 'request_id', 'method') },
        ended_while_stopping: json['ended_while_stopping'] == true
      )
    end

    def self.in_flight_entry?(entry)
      entry.is_a?(Hash) && IN_FLIGHT_KINDS.include?(entry['kind']) &&
        entry['request_id'].is_a?(String) && entry['method'].is_a?(String)
    end
  end
end
