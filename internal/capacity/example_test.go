package capacity_test

import (
	"fmt"

	"github.com/idempotent-consumer/sbcosmos/internal/capacity"
)

// Example plans 200 order messages per second, a tenth of them copies,
// with payments, on what the dev profile deploys: the two subscribers'
// fan-out makes Service Bus Standard's 1,000 credits per second the first
// limit, before the serverless orders container's 5,000 RU/s.
func Example() {
	in := capacity.DefaultInputs(capacity.ProfileDev)
	in.Rate, in.Duplicates, in.Payments = 200, 0.1, true
	if err := in.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	p := capacity.Compute(in)
	for _, c := range p.Containers {
		fmt.Printf("%s: %.0f RU/s\n", c.Name, c.RUs)
	}
	fmt.Printf("first limit: %s at %.0f messages/s\n", p.First.Name, p.First.MaxRate)
	fmt.Printf("needs: %d worker replicas, Service Bus %s, Cosmos DB %s\n", p.Needs.WorkerReplicas, p.Needs.ServiceBus, p.Needs.Cosmos)
	// Output:
	// orders: 6020 RU/s
	// loyalty: 1980 RU/s
	// shipping: 1980 RU/s
	// leases: 12 RU/s
	// first limit: Service Bus Standard namespace at 154 messages/s
	// needs: 3 worker replicas, Service Bus premium, Cosmos DB provisioned
}
