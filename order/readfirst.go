package order

// The adaptive choice between create-first and read-first for a first
// delivery (DeliveryCount 1) that the fact cache cannot answer is
// idempotent.CopyShare: see its documentation for the costs and the
// estimate.
