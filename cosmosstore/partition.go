package cosmosstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// opReadPartition is the partition read, as Error.Op names it.
const opReadPartition = "read partition"

// ReadPartition returns every document whose partition key value is pk,
// each a JSON object, in the order the service returns them: a query of
// that one logical partition, SELECT * FROM c WHERE c.<field> = @pk, a
// page at a time, where <field> is the Store's partition key path without
// its slash (tenantId for "/tenantId"). The filter repeats the partition
// key so that an emulator that ignores the query's partition key (cosmium)
// gives the same answer. The query is sent with EnableScanInQuery, so that
// it works on a container that indexes no path: it reads the partition's
// documents, which are few (one entity's), and uses no index. It reads at
// the client's priority (ClientOptions.PriorityLevel; an operator's tool
// should set Low). It is meant for audits, not for a consumer's path,
// which only reads by id. It is safe for concurrent use.
func (s *Store) ReadPartition(ctx context.Context, pk string) ([][]byte, error) {
	q := fmt.Sprintf("SELECT * FROM c WHERE c.%s = @pk", s.pkPath[1:])
	o := &azcosmos.QueryOptions{EnableScanInQuery: true, QueryParameters: []azcosmos.QueryParameter{{Name: "@pk", Value: pk}}}
	pager := s.containerFor(ctx).NewQueryItemsPager(q, azcosmos.NewPartitionKeyString(pk), o)
	out := [][]byte{}
	for pager.More() {
		resp, err := bounded(ctx, func(ctx context.Context) (azcosmos.QueryItemsResponse, error) {
			resp, err := pager.NextPage(ctx)
			s.addCharge(float64(resp.RequestCharge))
			return resp, err
		})
		if err != nil {
			return nil, classify(opReadPartition, pk, err)
		}
		for _, it := range resp.Items {
			if !json.Valid(it) {
				return nil, &Error{Op: opReadPartition, PartitionKey: pk, Index: -1, Err: fmt.Errorf("the query returned an item that is not JSON")}
			}
			out = append(out, it)
		}
	}
	return out, nil
}
