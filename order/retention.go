package order

import "github.com/idempotent-consumer/sbcosmos/idempotent"

// UnboundedRetention is the retention MinRetention reports when no finite
// retention is safe (see idempotent.UnboundedRetention).
const UnboundedRetention = idempotent.UnboundedRetention

// RedeliveryHorizon holds the broker settings that bound how long after a
// message was first processed another copy with the same MessageId can
// still be delivered: the core's idempotent.RedeliveryHorizon, which bounds
// inbox markers' TTL and the payments service's key retention
// (PaymentOptions.KeyRetention) from below.
type RedeliveryHorizon = idempotent.RedeliveryHorizon
