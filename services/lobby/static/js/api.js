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

export async function call(method, path, { body, token } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    throw new ApiError(response.status, data?.code ?? "http_error",
      data?.message ?? response.statusText, data?.details);
  }
  return data;
}

export const get = (path, options) => call("GET", path, options);
export const post = (path, body, options = {}) => call("POST", path, { ...options, body });

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
