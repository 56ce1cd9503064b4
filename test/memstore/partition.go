package memstore

import (
	"context"
	"sort"
)

// ReadPartition returns every live document whose partition key value is
// pk, ordered by id, as a query of one logical partition in Cosmos DB
// would ("SELECT * FROM c" with the partition key; its order is the
// service's). Expired documents are not returned. It is safe for
// concurrent use.
//
// It answers in one piece and fails only when ctx has ended, where Cosmos
// DB pages the answer and may fail a page (a 429 beyond the SDK's retries,
// a timeout). One order's partition holds a handful of documents, which
// Cosmos DB returns in one page; the audit's handling of a failed read is
// tested with a container that fails (order/audit's
// TestAudit_AFailedReadStopsWithAContinuation), so this simplification
// cannot hide it.
func (s *Store) ReadPartition(ctx context.Context, pk string) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.failure(OpRead, "read partition", pk, ""); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.parts[pk]))
	for id := range s.parts[pk] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([][]byte, 0, len(ids))
	for _, id := range ids {
		it, ok := s.live(pk, id)
		if !ok {
			continue
		}
		out = append(out, append([]byte(nil), it.Body...))
	}
	return out, nil
}
