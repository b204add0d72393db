# frozen_string_literal: true

require 'json'

# STAND-IN FOR SIDEKIQ, so that this example runs with Ruby alone. In a Rails app, delete
# this file and write `include Sidekiq::Job` where the jobs write `include TinyQueue::Job`:
# the job classes use nothing Sidekiq does not have.
#
# What it keeps of Sidekiq: `perform_async` and `perform_in`; arguments round-tripped
# through JSON, as Sidekiq stores them (symbols become strings, no objects); a job that
# raises is tried again after `sidekiq_retry_in`'s delay, its retry count starting at 0,
# until `sidekiq_options retry:` retries are spent, then `sidekiq_retries_exhausted` is
# called; several jobs run at once, on threads.
#
# What it does not: persistence (a process exit loses every job, where Sidekiq's Redis
# keeps them), Sidekiq's default backoff when no `sidekiq_retry_in` answers (here 1 s,
# doubling, capped at 30 s) and the retry set's poll interval (Sidekiq looks every few
# seconds, so a retry runs at or some seconds after its time; here at its time).
module TinyQueue
  # One enqueued job: its class, its JSON arguments, when it is due, its retries so far.
  Entry = Struct.new(:klass, :args, :at, :retry_count, keyword_init: true)

  class << self
    # The process's queue (Sidekiq's Redis); set by the boot file.
    attr_accessor :queue
  end

  # Include in a job class, as Sidekiq::Job.
  module Job
    def self.included(base)
      base.extend(ClassMethods)
    end

    module ClassMethods
      def sidekiq_options(options = nil)
        @sidekiq_options = (@sidekiq_options || { 'retry' => 25 }).merge(options.transform_keys(&:to_s)) if options
        @sidekiq_options || { 'retry' => 25 }
      end

      def sidekiq_retry_in(&block)
        block ? @sidekiq_retry_in = block : @sidekiq_retry_in
      end

      def sidekiq_retries_exhausted(&block)
        block ? @sidekiq_retries_exhausted = block : @sidekiq_retries_exhausted
      end

      def perform_async(*args)
        TinyQueue.queue.push(self, args, delay_s: 0)
      end

      def perform_in(seconds, *args)
        TinyQueue.queue.push(self, args, delay_s: seconds)
      end
    end
  end

  class Queue
    def initialize(concurrency: 4, on_error: ->(_entry, _error, _delay) {})
      @concurrency = concurrency
      @on_error = on_error
      @entries = []
      @lock = Mutex.new
      @ready = ConditionVariable.new
      @stopping = false
      @threads = []
    end

    def push(klass, args, delay_s:, retry_count: nil)
      entry = Entry.new(klass: klass, args: JSON.parse(JSON.generate(args)), at: now + delay_s.to_f, retry_count: retry_count)
      @lock.synchronize do
        @entries << entry
        @ready.broadcast
      end
      entry
    end

    def start
      @threads = Array.new(@concurrency) { Thread.new { work } }
      self
    end

    # Lets the jobs in hand finish (at most `timeout_s`); jobs not started are dropped.
    def stop(timeout_s: 5)
      @lock.synchronize do
        @stopping = true
        @ready.broadcast
      end
      deadline = now + timeout_s
      @threads.each { |t| t.join([deadline - now, 0].max) || t.kill }
    end

    private

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    def work
      while (entry = take)
        begin
          run(entry)
        rescue StandardError => e
          # A retries_exhausted hook that failed: Sidekiq logs it and goes on, so does this.
          @on_error.call(entry, e, nil)
        end
      end
    end

    # The next due job, waiting for one; nil once stopping.
    def take
      @lock.synchronize do
        loop do
          return nil if @stopping

          due = @entries.min_by(&:at)
          if due && due.at <= now
            @entries.delete(due)
            return due
          end
          @ready.wait(@lock, due ? due.at - now : nil)
        end
      end
    end

    def run(entry)
      entry.klass.new.perform(*entry.args)
    rescue StandardError => e
      retry_or_bury(entry, e)
    end

    # Sidekiq's retry: again after sidekiq_retry_in's delay, or to the hook once retries are spent.
    def retry_or_bury(entry, error)
      count = entry.retry_count.nil? ? 0 : entry.retry_count + 1
      if count >= entry.klass.sidekiq_options['retry'].to_i
        @on_error.call(entry, error, nil)
        job = { 'class' => entry.klass.name, 'args' => entry.args, 'retry_count' => count }
        entry.klass.sidekiq_retries_exhausted&.call(job, error)
      else
        delay = entry.klass.sidekiq_retry_in&.call(count, error) || [2**count, 30].min
        @on_error.call(entry, error, delay)
        push(entry.klass, entry.args, delay_s: delay, retry_count: count)
      end
    end
  end
end
