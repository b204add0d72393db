/** The owner calls' word lists: how a relayed action or a segment-end callback went (metric labels, logs). */

/**
 * Why a runHTTPRequest was answered with an error instead of the owner's response.
 * `send_data`: an answer only GitLab Workhorse can complete (Gitlab-Workhorse-Send-Data), relayed past it.
 */
export const relayErrorTypes = ['refused_path', 'refused_method', 'timeout', 'too_large', 'network', 'aborted', 'send_data'] as const;
export type RelayErrorType = (typeof relayErrorTypes)[number];

/** How a segment-end callback went. */
export const callbackResults = ['ok', 'retried_ok', 'failed'] as const;
export type CallbackResult = (typeof callbackResults)[number];
