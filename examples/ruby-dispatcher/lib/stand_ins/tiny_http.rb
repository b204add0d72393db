# frozen_string_literal: true

require 'io/wait'
require 'socket'

# STAND-IN FOR PUMA AND THE RAILS ROUTER, so that this example receives the segment-end
# callback with Ruby alone (WEBrick left Ruby's standard library in 3.0, and Debian's
# `ruby` does not bring it). In a Rails app, delete this file: the route is
#
#   post '/api/v4/internal/ai/duo_workflows/workflows/:id/segment_end', to: 'segment_ends#create'
#
# (GitLab mounts its internal API with Grape; the action is the same).
#
# HTTP/1.1, one request per connection (answered with Connection: close), a body by
# Content-Length or chunked, at most MAX_BODY bytes. Each connection on a thread of its own.
class TinyHttp
  Request = Struct.new(:method, :path, :headers, :body, keyword_init: true)

  MAX_BODY = 1024 * 1024
  MAX_HEADER_LINES = 100
  REASONS = { 200 => 'OK', 204 => 'No Content', 400 => 'Bad Request', 401 => 'Unauthorized', 404 => 'Not Found',
              503 => 'Service Unavailable' }.freeze

  class BadRequest < StandardError; end

  # `handler.call(request)` answers [status, body].
  def initialize(host:, port:, handler:, read_timeout_s: 10)
    @server = TCPServer.new(host, port)
    @handler = handler
    @read_timeout_s = read_timeout_s
  end

  def url
    "http://#{@server.addr[3]}:#{@server.addr[1]}"
  end

  def start
    @thread = Thread.new do
      loop do
        socket = @server.accept
        Thread.new { serve(socket) }
      end
    rescue IOError, Errno::EBADF
      nil # closed by #stop
    end
    self
  end

  def stop
    @server.close
    @thread&.join(1)
  end

  private

  def serve(socket)
    request = read_request(socket)
    status, body = @handler.call(request)
    respond(socket, status, body)
  rescue BadRequest
    respond(socket, 400, '{"message":"bad request"}')
  rescue IOError, SystemCallError
    nil # the caller went away
  ensure
    socket.close unless socket.closed?
  end

  def read_request(socket)
    method, target, version = line(socket).split(' ', 3)
    raise BadRequest unless method && target&.start_with?('/') && version&.start_with?('HTTP/1.')

    headers = {}
    MAX_HEADER_LINES.times do
      header = line(socket)
      break if header.empty?

      name, value = header.split(':', 2)
      raise BadRequest unless value

      headers[name.strip.downcase] = value.strip
    end
    Request.new(method: method, path: target.split('?', 2).first, headers: headers, body: read_body(socket, headers))
  end

  def read_body(socket, headers)
    return read_chunked(socket) if headers['transfer-encoding'].to_s.downcase == 'chunked'

    length = Integer(headers.fetch('content-length', '0'), 10)
    raise BadRequest if length.negative? || length > MAX_BODY

    read_exactly(socket, length)
  rescue ArgumentError
    raise BadRequest
  end

  def read_chunked(socket)
    body = +''
    loop do
      size = Integer(line(socket).split(';', 2).first, 16)
      raise BadRequest if body.bytesize + size > MAX_BODY

      body << read_exactly(socket, size)
      line(socket)
      return body if size.zero?
    end
  end

  def line(socket)
    raise IOError, 'read timeout' unless socket.wait_readable(@read_timeout_s)

    text = socket.gets("\r\n", 8192) or raise IOError, 'closed'
    text.chomp
  end

  def read_exactly(socket, length)
    body = +''
    while body.bytesize < length
      raise IOError, 'read timeout' unless socket.wait_readable(@read_timeout_s)

      body << socket.readpartial(length - body.bytesize)
    end
    body
  end

  def respond(socket, status, body)
    body = body.to_s
    head = ["HTTP/1.1 #{status} #{REASONS.fetch(status, 'Status')}", 'Connection: close']
    head << 'Content-Type: application/json' << "Content-Length: #{body.bytesize}" unless status == 204
    socket.write("#{head.join("\r\n")}\r\n\r\n#{status == 204 ? '' : body}")
  end
end
