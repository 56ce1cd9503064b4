// Package capacity is the model behind `orderctl plan`: from a message rate,
// the share of duplicates and redeliveries, payments on or off, the inbox
// subscribers and the relay, it derives per message the Cosmos DB requests
// of every path (the same requests the tests count, see Paths) and their
// request units from Microsoft's published per-operation figures (Figures,
// each with its source, the estimates marked), the Service Bus operations
// and throttling credits or messaging-unit bytes, the ceilings they imply,
// which one the rate reaches first, and the workers, concurrency, tier and
// throughput it needs.
//
// Everything is arithmetic on its inputs: no Azure, no clock, no state;
// Compute is safe for concurrent use.
package capacity

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The Cosmos DB and Service Bus shapes a deployment can have.
const (
	Serverless  = "serverless"  // Cosmos DB serverless account: a ceiling per container
	Provisioned = "provisioned" // Cosmos DB provisioned or autoscale (maximum) RU/s, shared by the database's containers
	Standard    = "standard"    // Service Bus Standard: credit-based throttling per namespace
	Premium     = "premium"     // Service Bus Premium: messaging units
)

// Inputs is what a plan is computed from. DefaultInputs returns what
// infra/bicep deploys for a profile; errors of Validate name the orderctl
// plan flag of each field.
type Inputs struct {
	Rate          float64  `json:"rate"`          // order messages per second on the queue, copies and redeliveries included
	Duplicates    float64  `json:"duplicates"`    // share of them that are copies of an order another worker stored, on their first delivery
	Redeliveries  float64  `json:"redeliveries"`  // share of them that are redeliveries of an order already stored
	StatusChanges float64  `json:"statusChanges"` // status-change messages per new order, on the same queue
	Payments      bool     `json:"payments"`      // the worker captures each new order's payment (PAYMENTS_URL)
	Subscribers   []string `json:"subscribers"`   // inbox consumers, one topic subscription each
	Relay         bool     `json:"relay"`         // the relay publishes the OrderAccepted events to the topic

	Cosmos        string  `json:"cosmos"`         // Serverless or Provisioned
	CosmosRUs     float64 `json:"cosmosRUs"`      // Provisioned: the database's RU/s (autoscale: its maximum)
	ServiceBus    string  `json:"serviceBus"`     // Standard or Premium
	MessagingUnit int     `json:"messagingUnits"` // Premium: messaging units
	MessageKB     float64 `json:"messageKB"`      // size of one Service Bus message

	Concurrency        int           `json:"concurrency"`        // WORKER_CONCURRENCY of the worker and of each subscriber
	Workers            int           `json:"workers"`            // most worker replicas (workerMaxReplicas)
	SubscriberReplicas int           `json:"subscriberReplicas"` // most replicas of each subscriber (subscriberMaxReplicas)
	CosmosLatency      time.Duration `json:"cosmosLatencyNs"`    // one Cosmos DB round trip, as measured
	SettleLatency      time.Duration `json:"settleLatencyNs"`    // one Service Bus settlement, as measured
	PaymentLatency     time.Duration `json:"paymentLatencyNs"`   // one capture at the payment gateway, as measured
	RelayPageSize      int           `json:"relayPageSize"`      // RELAY_PAGE_SIZE
	RelayLease         time.Duration `json:"relayLeaseNs"`       // RELAY_LEASE_DURATION: renewed every third of it
	RelayPoll          time.Duration `json:"relayPollNs"`        // RELAY_POLL_INTERVAL: after a poll with events the relay waits 1/32 of it
	RelayCheckpoint    time.Duration `json:"relayCheckpointNs"`  // RELAY_CHECKPOINT_INTERVAL: at most one checkpoint per range per interval
}

// The deployment profiles of infra/bicep/main.bicep (DEPLOY_PROFILE).
const (
	ProfileDev        = "dev"
	ProfileProduction = "production"
)

// DefaultInputs returns the inputs for what infra/bicep deploys with
// profile (ProfileDev or ProfileProduction): serverless Cosmos DB and
// Service Bus Standard, or autoscale up to 1,000 RU/s shared by the
// database and Premium with one messaging unit; in both the worker at
// WORKER_CONCURRENCY 8 on at most 10 replicas, the loyalty and shipping
// subscribers on at most 5 each, and the relay with its defaults
// (TestDefaultsAgreeWithBicep). The rate is 100 messages/s without copies;
// the latencies are assumptions to replace with measured ones.
func DefaultInputs(profile string) Inputs {
	in := Inputs{
		Rate: 100, Subscribers: []string{"loyalty", "shipping"}, Relay: true,
		Cosmos: Serverless, ServiceBus: Standard, MessageKB: 1,
		Concurrency: 8, Workers: 10, SubscriberReplicas: 5,
		CosmosLatency: 10 * time.Millisecond, SettleLatency: 10 * time.Millisecond, PaymentLatency: 100 * time.Millisecond,
		RelayPageSize: 100, RelayLease: 30 * time.Second, RelayPoll: time.Second, RelayCheckpoint: time.Second,
	}
	if profile == ProfileProduction {
		in.Cosmos, in.CosmosRUs, in.ServiceBus, in.MessagingUnit = Provisioned, 1000, Premium, 1
	}
	return in
}

// Validate reports every input that cannot be planned with, at once, each
// by its orderctl plan flag.
func (in Inputs) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	share := func(flag string, v float64) {
		if math.IsNaN(v) || v < 0 || v > 1 {
			bad("-%s %v is not a share between 0 and 1", flag, v)
		}
	}
	if math.IsNaN(in.Rate) || math.IsInf(in.Rate, 0) || in.Rate <= 0 {
		bad("-rate %v must be a positive number of messages per second", in.Rate)
	}
	share("duplicates", in.Duplicates)
	share("redeliveries", in.Redeliveries)
	if in.Duplicates >= 0 && in.Redeliveries >= 0 && in.Duplicates <= 1 && in.Redeliveries <= 1 && in.Duplicates+in.Redeliveries > 1 {
		bad("-duplicates %v and -redeliveries %v add up to more than 1", in.Duplicates, in.Redeliveries)
	}
	if math.IsNaN(in.StatusChanges) || in.StatusChanges < 0 || in.StatusChanges > 100 {
		bad("-status-changes %v must be between 0 and 100 per order", in.StatusChanges)
	}
	seen := map[string]bool{}
	for _, s := range in.Subscribers {
		switch {
		case s == "" || strings.ContainsAny(s, " \t/\\"):
			bad("-subscribers: %q is not a subscription name", s)
		case seen[s]:
			bad("-subscribers: %q is named twice", s)
		}
		seen[s] = true
	}
	if len(in.Subscribers) > 0 && !in.Relay {
		bad("-subscribers %s without -relay: nothing publishes the events they consume", strings.Join(in.Subscribers, ","))
	}
	switch in.Cosmos {
	case Serverless:
		if in.CosmosRUs != 0 {
			bad("-cosmos-ru %v with a serverless account: serverless has no throughput to set", in.CosmosRUs)
		}
	case Provisioned:
		if math.IsNaN(in.CosmosRUs) || in.CosmosRUs <= 0 || in.CosmosRUs != ProvisionedIncrement*math.Round(in.CosmosRUs/ProvisionedIncrement) {
			bad("-cosmos-ru %v must be a positive multiple of 100 RU/s with provisioned throughput", in.CosmosRUs)
		}
	default:
		bad("-cosmos %q must be %s or %s", in.Cosmos, Serverless, Provisioned)
	}
	switch in.ServiceBus {
	case Standard:
		if in.MessagingUnit != 0 {
			bad("-messaging-units %d with Service Bus Standard: messaging units are Premium's", in.MessagingUnit)
		}
	case Premium:
		if !slices.Contains([]int{1, 2, 4, 8, 16}, in.MessagingUnit) {
			bad("-messaging-units %d must be 1, 2, 4, 8 or 16", in.MessagingUnit)
		}
	default:
		bad("-servicebus %q must be %s or %s", in.ServiceBus, Standard, Premium)
	}
	if math.IsNaN(in.MessageKB) || in.MessageKB <= 0 || in.MessageKB > 100*1024 {
		bad("-message-kb %v must be above 0 and at most 102400 (Premium's 100 MB)", in.MessageKB)
	} else if in.ServiceBus == Standard && in.MessageKB > StandardMaxMessageKB {
		bad("-message-kb %v is over Service Bus Standard's %v KB messages", in.MessageKB, StandardMaxMessageKB)
	}
	if in.Concurrency < 1 || in.Concurrency > 5000 {
		bad("-concurrency %d is not between 1 and 5000 (WORKER_CONCURRENCY's range)", in.Concurrency)
	}
	if in.Workers < 1 || in.Workers > 300 {
		bad("-workers %d is not between 1 and 300 (workerMaxReplicas' range)", in.Workers)
	}
	if in.SubscriberReplicas < 1 || in.SubscriberReplicas > 300 {
		bad("-subscriber-replicas %d is not between 1 and 300", in.SubscriberReplicas)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"cosmos-latency", in.CosmosLatency}, {"settle-latency", in.SettleLatency}, {"payment-latency", in.PaymentLatency}} {
		if d.v <= 0 {
			bad("-%s %v must be positive", d.flag, d.v)
		}
	}
	if in.Relay {
		if in.RelayPageSize < 1 || in.RelayPageSize > 10000 {
			bad("-relay-page-size %d is not between 1 and 10000 (RELAY_PAGE_SIZE's range)", in.RelayPageSize)
		}
		if in.RelayLease <= 0 {
			bad("-relay-lease %v must be positive", in.RelayLease)
		}
		if in.RelayPoll <= 0 {
			bad("-relay-poll %v must be positive", in.RelayPoll)
		}
		if in.RelayCheckpoint <= 0 {
			bad("-relay-checkpoint %v must be positive", in.RelayCheckpoint)
		}
	}
	return errors.Join(errs...)
}
