# frozen_string_literal: true

require 'base64'
require 'json'
require 'openssl'

module Longrun
  # The two HS256 JWTs between longrun and the owner, signed with the shared secret (the 32
  # bytes of GitLab Workhorse's secret file) — docs/spec.md §2 and §6,
  # docs/owner-integration.md §1 and §6:
  #
  #   longrun -> owner  header Gitlab-Workhorse-Api-Request on the segment-end callback:
  #                     iss "gitlab-workhorse", iat. In Rails: Gitlab::Workhorse.verify_api_request!.
  #   owner -> longrun  Authorization: Bearer on /internal/workflows/:id/{stop,run}: iss
  #                     "gitlab", workflow_id (a string, the path's), iat, exp at most five
  #                     minutes after iat. Signed here per call, for one minute.
  #
  # Written with OpenSSL::HMAC so that the example needs no gem; in Rails, the `jwt` gem does it.
  module Jwt
    GATEWAY_ISSUER = 'gitlab-workhorse'
    OWNER_ISSUER = 'gitlab'
    # Clock skew tolerated between longrun and the owner (longrun's own client allows 60 s).
    LEEWAY_S = 60
    # The oldest iat accepted on a gateway token. Rails' verify_api_request! refuses
    # Gitlab-Workhorse-Api-Request tokens issued more than 90 s ago (API_REQUEST_JWT_VALIDITY),
    # which caps the replay value of a leaked one; longrun re-signs its token every 30 s.
    MAX_AGE_S = 90
    # What the owner's token lives: the internal routes accept at most 300 s.
    OWNER_TOKEN_LIFETIME_S = 60

    # A token that does not verify; the message says why (for the log, never for the caller).
    class Invalid < StandardError; end

    module_function

    # An HS256 JWT of `claims`.
    def encode(claims, secret)
      signing_input = [{ alg: 'HS256', typ: 'JWT' }, claims].map { |part| base64url(JSON.generate(part)) }.join('.')
      "#{signing_input}.#{base64url(hmac(secret, signing_input))}"
    end

    # The owner's token for one workflow's internal routes, valid from now for a minute.
    def owner_token(secret, workflow_id, now: Time.now.to_i)
      encode({ iss: OWNER_ISSUER, workflow_id: workflow_id.to_s, iat: now, exp: now + OWNER_TOKEN_LIFETIME_S }, secret)
    end

    # Verifies a Gitlab-Workhorse-Api-Request token and returns its claims; raises Invalid.
    # The signature is checked before anything of the payload is read, and compared in
    # constant time. Then, as longrun's own client checks it: iss "gitlab-workhorse", exp and
    # nbf when present (60 s of skew); and iat present, not in the future, at most 90 s old,
    # as Rails checks it.
    def verify_gateway_token(secret, token, now: Time.now.to_i, max_age_s: MAX_AGE_S)
      raise Invalid, 'no token' if token.nil? || token.empty?

      parts = token.split('.', -1)
      raise Invalid, 'not three parts' unless parts.length == 3

      header = json_object(parts[0], 'header')
      # Only HS256: "none" or another algorithm chosen by the sender is how forged tokens pass.
      raise Invalid, "alg #{header['alg'].inspect}" unless header['alg'] == 'HS256'
      raise Invalid, 'crit header' if header.key?('crit')

      given = decode64(parts[2], 'signature')
      raise Invalid, 'bad signature' unless OpenSSL.secure_compare(hmac(secret, "#{parts[0]}.#{parts[1]}"), given)

      claims = json_object(parts[1], 'payload')
      raise Invalid, "iss #{claims['iss'].inspect}" unless claims['iss'] == GATEWAY_ISSUER

      iat = numeric(claims, 'iat') or raise Invalid, 'no iat'
      raise Invalid, 'iat in the future' if iat > now + LEEWAY_S
      raise Invalid, 'iat too old' if iat < now - max_age_s
      exp = numeric(claims, 'exp')
      raise Invalid, 'expired' if exp && exp <= now - LEEWAY_S
      nbf = numeric(claims, 'nbf')
      raise Invalid, 'not yet valid' if nbf && nbf > now + LEEWAY_S

      claims
    end

    def hmac(secret, data)
      OpenSSL::HMAC.digest('SHA256', secret, data)
    end

    def base64url(bytes)
      Base64.urlsafe_encode64(bytes, padding: false)
    end

    def decode64(part, what)
      # urlsafe_decode64 pads and then decodes strictly: other characters raise.
      Base64.urlsafe_decode64(part)
    rescue ArgumentError
      raise Invalid, "#{what} is not base64url"
    end

    def json_object(part, what)
      value = JSON.parse(decode64(part, what))
      raise Invalid, "#{what} is not a JSON object" unless value.is_a?(Hash)

      value
    rescue JSON::ParserError
      raise Invalid, "#{what} is not JSON"
    end

    # A NumericDate claim: nil when absent, Invalid when not a number.
    def numeric(claims, name)
      return nil unless claims.key?(name)
      raise Invalid, "#{name} is not a number" unless claims[name].is_a?(Numeric)

      claims[name]
    end
  end
end
