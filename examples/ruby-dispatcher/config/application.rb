# frozen_string_literal: true

require 'json'

# STAND-IN FOR Rails.application and Rails.logger: what the jobs and the controller reach
# for, set once by bin/dispatcher. Every event is one JSON line on stdout (the test reads
# them; in Rails, a structured log line).
module App
  class << self
    # Longrun::Client, Turns, the shared secret's bytes, the most segments of one turn; the
    # watchdog's period and its confirmation delay, in seconds (WatchdogJob).
    attr_accessor :client, :turns, :secret, :max_segments, :watch_period_s, :lost_confirm_s

    def log(event, **fields)
      line = JSON.generate({ event: event, at_ms: (Time.now.to_f * 1000).round }.merge(fields))
      LOG_LOCK.synchronize { $stdout.puts(line) }
    end
  end

  LOG_LOCK = Mutex.new
end
