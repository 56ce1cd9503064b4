package simulation

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// The poison-message fault (FaultRates.Poison): a valid order whose stored
// document reads back undecodable once it is created, as a document written
// by another tool, or a number a JavaScript-based store kept as a float,
// does. The store answers every call; only the order's own document is
// unreadable:
//
//   - a read of the order document (the status changes' read, and the read
//     a copy of the order would make) returns it with its version a
//     string, which order.OrderDocument cannot decode: the consumer
//     reports a StoreError, a dependency failure by its reason, on every
//     delivery;
//   - the status changes' conditional patch (WHERE c.version < v) fails its
//     condition, as Cosmos DB's does when the version is not a number.
//
// So every status change of the order fails on every delivery until the
// broker dead-letters it at MaxDeliveryCount (or the consumer dead-letters
// it with a reason), while the store's probe (Ping) answers: the worker's
// circuit breaker must not open for them, nor the healthy orders wait
// behind them. The order's own message is created on its first delivery
// (a create reads nothing) and the order is spared every other fault, so
// that nothing else of it reads the document. The stored document itself
// stays intact: the checker reads the store, not the fault.

// poisonStream separates the poison draw from the plan's other streams.
const poisonStream = 0x9015_0000

// poisonDraw reports whether valid order i is a poison order. It draws
// from a stream of its own, so the other decisions of a seed stay what they
// were before the fault existed.
func (p *plan) poisonDraw(i int) bool {
	if p.rates.Poison == 0 {
		return false
	}
	r := rand.New(rand.NewPCG(p.seed^planStream^poisonStream, uint64(i)))
	return r.Float64() < p.rates.Poison
}

// poisoned reports whether a call on document id in partition pk touches a
// poison order's document.
func (s *faultStore) poisoned(pk, id string) bool {
	return pk == id && s.poison[pk]
}

// undecodable returns body, a stored order document, with its version a
// string: JSON still, but no order.OrderDocument. It counts the fault.
func (s *faultStore) undecodable(body []byte) []byte {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	doc["version"] = fmt.Sprintf("%v (written by another tool)", doc["version"])
	b, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	s.tr.count(func(c *FaultCounts) { c.PoisonReads++ })
	return b
}

// errPoisonPatch is the conditional patch's answer on a poison order's
// document: the condition compares a number with a string, which is false.
var errPoisonPatch = fmt.Errorf("simulated 412: the patch condition c.version < v is false on a document whose version is not a number: %w", idempotent.ErrPreconditionFailed)
