// Calls to the API: JSON in, JSON out, the bearer token, and problem+json
// errors as an APIError carrying the problem's code.

export class APIError extends Error {
  constructor(status, problem, retryAfter) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
    this.code = this.problem.code || codeForStatus(status);
    this.retryAfter = retryAfter;
  }
}

function codeForStatus(status) {
  switch (status) {
    case 0: return "NETWORK";
    case 400: return "BAD_REQUEST";
    case 401: return "UNAUTHORIZED";
    case 403: return "FORBIDDEN";
    case 404: return "NOT_FOUND";
    case 409: return "INVALID_STATE";
    case 413: return "BODY_TOO_LARGE";
    case 422: return "VALIDATION_FAILED";
    case 429: return "RATE_LIMITED";
    case 503: return "UNAVAILABLE";
    default: return status >= 500 ? "INTERNAL" : "BAD_REQUEST";
  }
}

// api calls the API; headers are added to the request's own.
export async function api(method, path, { token, body, headers: extra } = {}) {
  const headers = { ...extra, Accept: "application/json, application/problem+json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = "Bearer " + token;
  let resp;
  try {
    resp = await fetch(path, {
      method, headers, cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new APIError(0, { code: "NETWORK", detail: String((e && e.message) || e) });
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!resp.ok) {
    throw new APIError(resp.status, data && typeof data === "object" ? data : null, resp.headers.get("Retry-After"));
  }
  return { status: resp.status, data, headers: resp.headers };
}

// nextLink is the rel="next" URL of a list's Link header, or "".
export function nextLink(headers) {
  const m = /<([^>]*)>\s*;\s*rel="?next"?/.exec((headers && headers.get("Link")) || "");
  return m ? m[1] : "";
}
