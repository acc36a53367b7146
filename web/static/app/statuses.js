// An order's statuses: their words for a buyer and for an operator, their
// order on the operator's card, and their rank.

export const STATUS_LABEL = {
  PENDING: "Placing…",
  AWAITING_PAYMENT: "Awaiting payment",
  PAID: "Paid",
  CANCELLED: "Cancelled",
  EXPIRED: "Expired",
  FAILED: "Failed",
  REFUNDED: "Refunded",
  REFUNDED_RESTOCKED: "Refunded, unit back on sale",
};

// The operator counts orders; a buyer watches one.
export const STATUS_COUNT_LABEL = {
  PENDING: "Pending",
  AWAITING_PAYMENT: "Awaiting payment",
  PAID: "Paid",
  CANCELLED: "Cancelled",
  EXPIRED: "Expired",
  FAILED: "Failed",
  REFUNDED: "Refunded",
  REFUNDED_RESTOCKED: "Refunded, restocked",
};

export const STATUS_ORDER = ["PENDING", "AWAITING_PAYMENT", "PAID", "CANCELLED", "EXPIRED", "FAILED", "REFUNDED", "REFUNDED_RESTOCKED"];

// An order only moves forward: PENDING, then AWAITING_PAYMENT, then one
// final status; a PAID order may still be refunded by an operator. A late
// or replayed event never moves it back.
export const RANK = {
  PENDING: 0, AWAITING_PAYMENT: 1, PAID: 2, CANCELLED: 2, EXPIRED: 2, FAILED: 2, REFUNDED: 3, REFUNDED_RESTOCKED: 3,
};
