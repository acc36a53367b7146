// Formatting of what the server sends: times, money, durations, ids, links.
// Pure functions of their arguments.

// parseTime reads an RFC 3339 time; Go writes up to 9 fractional digits,
// more than Date.parse promises to accept.
export function parseTime(s) {
  if (typeof s !== "string") return NaN;
  return Date.parse(s.replace(/(\.\d{3})\d+/, "$1"));
}

// money renders an amount in its currency's minor units (the API's
// price_cents and amount_cents) with the currency, as the reader's locale
// writes it: 499.00 USD as "$499.00", 500 JPY as "¥500" (yen have no minor
// unit). Without a currency, a plain number with two decimals.
export function money(minor, currency) {
  const n = Number(minor);
  if (!Number.isFinite(n)) return "";
  if (typeof currency === "string" && /^[A-Z]{3}$/.test(currency)) {
    try {
      const f = new Intl.NumberFormat(undefined, { style: "currency", currency });
      return f.format(n / 10 ** minorDigits(currency));
    } catch {
      // A code this browser does not know: the number and the code.
    }
    return `${(n / 100).toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 })} ${currency}`;
  }
  return (n / 100).toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
}

// minorDigits is how many decimals a currency's minor unit has (2 for
// USD, 0 for JPY), as the browser's ISO 4217 table says.
export function minorDigits(currency) {
  return new Intl.NumberFormat("en", { style: "currency", currency }).resolvedOptions().maximumFractionDigits;
}

export function clock(ms) {
  if (!Number.isFinite(ms)) return "";
  // With the zone: a buyer and an operator may not share one.
  return new Date(ms).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
}

// duration renders ms as 1d 02:03:04, 02:03:04 or 03:04.
export function duration(ms) {
  let s = Math.max(0, Math.ceil(ms / 1000));
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const two = (x) => String(x).padStart(2, "0");
  const hms = h > 0 || d > 0 ? `${two(h)}:${two(m)}:${two(s)}` : `${two(m)}:${two(s)}`;
  return d > 0 ? `${d}d ${hms}` : hms;
}

export function compareIDsDesc(a, b) {
  // Ids are decimal strings of 64-bit numbers: longer is larger.
  if (a.length !== b.length) return b.length - a.length;
  return a < b ? 1 : a > b ? -1 : 0;
}

// safeBaseURL accepts only http(s) URLs, so a configured link can never
// become javascript:.
export function safeBaseURL(s) {
  try {
    const u = new URL(s, location.href);
    if (u.protocol !== "http:" && u.protocol !== "https:") return "";
    return u.href.replace(/\/+$/, "");
  } catch {
    return "";
  }
}
