// The HTTP API as the pages use it: JSON in and out, a seat token when there is one, and one
// error shape ({status, code, message}) for every refusal.

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

// A token refused for good: the seat is not (or no longer) this browser's.
export const SEAT_REFUSALS = new Set(["not_seated", "wrong_table", "expired_token", "invalid_token", "missing_token"]);
export const seatRefused = (error) => error instanceof ApiError && SEAT_REFUSALS.has(error.code);

const randomKey = () => crypto.randomUUID?.() ?? Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");

export async function call(method, path, { body, token, idempotent } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = `Bearer ${token}`;
  // A request that makes something carries an Idempotency-Key: its retries (below, after a
  // lost answer or a 503) and any repeat get the first answer, and nothing is made twice.
  if (idempotent) headers["Idempotency-Key"] = randomKey();
  let response;
  for (let attempt = 0; ; attempt++) {
    try {
      response = await fetch(path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (!(idempotent && response.status === 503 && attempt < 3)) break;
    } catch (error) {
      if (!idempotent || attempt >= 3) throw error;
    }
    await new Promise((done) => setTimeout(done, 300 * 2 ** attempt));
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    throw new ApiError(response.status, data?.code ?? "http_error",
      data?.message ?? response.statusText, data?.details);
  }
  return data;
}

export const get = (path, options) => call("GET", path, options);
export const post = (path, body, options = {}) => call("POST", path, { ...options, body });
export const del = (path, options) => call("DELETE", path, options);

// Seat tokens are kept per table in localStorage: a reload (or another tab) keeps the seat.
const seatKey = (tableId) => `caravel.seat.${tableId}`;

export function savedSeat(tableId) {
  try { return JSON.parse(localStorage.getItem(seatKey(tableId))); } catch { return null; }
}

export function saveSeat(tableId, seat) {
  localStorage.setItem(seatKey(tableId), JSON.stringify(seat));
}

export function forgetSeat(tableId) {
  localStorage.removeItem(seatKey(tableId));
}
