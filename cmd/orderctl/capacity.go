package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/idempotent-consumer/sbcosmos/internal/capacity"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

// planConfig is orderctl plan's configuration: the capacity model's inputs
// (defaults: what infra/bicep deploys for DEPLOY_PROFILE) and the output
// format.
type planConfig struct {
	capacity.Inputs
	Profile     string
	subscribers string
	Format      string
}

// parsePlanConfig reads orderctl plan's flags (args after "plan") and the
// variables they default to. A command line mistake is returned alone;
// otherwise every bad variable and every bad input at once.
func parsePlanConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (planConfig, error) {
	var c planConfig
	env := cli.NewEnv(fs, getenv)
	d := capacity.DefaultInputs(capacity.ProfileDev)
	env.String(&c.Profile, "profile", "DEPLOY_PROFILE", capacity.ProfileDev, "deployment profile whose shape to plan on: dev (Cosmos DB serverless, Service Bus Standard) or production (autoscale to 1,000 RU/s, Premium with 1 messaging unit)")
	env.Float(&c.Rate, "rate", "", d.Rate, "order messages per second on the queue, copies and redeliveries included")
	env.Float(&c.Duplicates, "duplicates", "", 0, "share of the messages that are copies of an order another worker stored (first deliveries); copies the same worker stored cost nothing")
	env.Float(&c.Redeliveries, "redeliveries", "", 0, "share of the messages that are redeliveries of an order already stored")
	env.Float(&c.StatusChanges, "status-changes", "", 0, "status-change messages per new order")
	env.Bool(&c.Payments, "payments", "", false, "the worker captures each new order's payment (PAYMENTS_URL set)")
	env.String(&c.subscribers, "subscribers", "", strings.Join(d.Subscribers, ","), "inbox subscribers, one topic subscription each, comma-separated; empty for none")
	env.Bool(&c.Relay, "relay", "", d.Relay, "the relay publishes the OrderAccepted events to the topic")
	env.String(&c.Cosmos, "cosmos", "", "", "Cosmos DB throughput: serverless or provisioned (default: the profile's)")
	env.Float(&c.CosmosRUs, "cosmos-ru", "", 0, "provisioned (autoscale maximum) RU/s of the database (default: the profile's)")
	env.String(&c.ServiceBus, "servicebus", "", "", "Service Bus tier: standard or premium (default: the profile's)")
	env.Int(&c.MessagingUnit, "messaging-units", "", 0, "Premium messaging units (default: the profile's)")
	env.Float(&c.MessageKB, "message-kb", "", d.MessageKB, "size of one Service Bus message, in KB")
	env.Int(&c.Concurrency, "concurrency", "WORKER_CONCURRENCY", d.Concurrency, "messages each worker and subscriber replica handles at once")
	env.Int(&c.Workers, "workers", "", d.Workers, "most worker replicas (workerMaxReplicas)")
	env.Int(&c.SubscriberReplicas, "subscriber-replicas", "", d.SubscriberReplicas, "most replicas of each subscriber (subscriberMaxReplicas)")
	env.Duration(&c.CosmosLatency, "cosmos-latency", "", d.CosmosLatency, "one Cosmos DB round trip as you measured it (assumed otherwise)")
	env.Duration(&c.SettleLatency, "settle-latency", "", d.SettleLatency, "one Service Bus settlement as you measured it (assumed otherwise)")
	env.Duration(&c.PaymentLatency, "payment-latency", "", d.PaymentLatency, "one payment capture as you measured it (assumed otherwise)")
	env.Int(&c.RelayPageSize, "relay-page-size", "RELAY_PAGE_SIZE", d.RelayPageSize, "most changes per change-feed read")
	env.Duration(&c.RelayLease, "relay-lease", "RELAY_LEASE_DURATION", d.RelayLease, "relay lease duration, renewed every third of it")
	env.Duration(&c.RelayPoll, "relay-poll", "RELAY_POLL_INTERVAL", d.RelayPoll, "relay poll interval: it waits 1/32 of it after a poll with events")
	env.Duration(&c.RelayCheckpoint, "relay-checkpoint", "RELAY_CHECKPOINT_INTERVAL", d.RelayCheckpoint, "least time between two checkpoints of a feed range")
	env.String(&c.Format, "format", "", "table", "output: table or json")
	fs.Usage = func() { planUsage(fs) }
	err := env.Parse(args)
	var usageErr *cli.UsageError
	if errors.Is(err, flag.ErrHelp) || errors.As(err, &usageErr) {
		return c, err
	}
	errs := []error{err}
	c.Subscribers = nil
	if c.subscribers != "" {
		for s := range strings.SplitSeq(c.subscribers, ",") {
			c.Subscribers = append(c.Subscribers, strings.TrimSpace(s))
		}
	}
	if c.Profile != capacity.ProfileDev && c.Profile != capacity.ProfileProduction {
		errs = append(errs, fmt.Errorf("DEPLOY_PROFILE (-profile) %q must be dev or production", c.Profile))
	} else {
		p := capacity.DefaultInputs(c.Profile)
		if c.Cosmos == "" {
			c.Cosmos = p.Cosmos
			if c.CosmosRUs == 0 {
				c.CosmosRUs = p.CosmosRUs
			}
		}
		if c.ServiceBus == "" {
			c.ServiceBus = p.ServiceBus
			if c.MessagingUnit == 0 {
				c.MessagingUnit = p.MessagingUnit
			}
		}
	}
	if c.Format != "table" && c.Format != "json" {
		errs = append(errs, fmt.Errorf("-format %q must be table or json", c.Format))
	}
	errs = append(errs, c.Inputs.Validate())
	return c, errors.Join(errs...)
}

// runPlan is "orderctl plan": it computes the capacity plan and prints it.
// It reads nothing but its arguments and environment.
func runPlan(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("orderctl plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c, err := parsePlanConfig(fs, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	p := capacity.Compute(c.Inputs)
	if c.Format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	}
	return p.WriteText(stdout)
}

func planUsage(fs *flag.FlagSet) {
	fmt.Fprint(fs.Output(), `Usage: orderctl plan [flags]

Prints a capacity plan, without Azure: per message the Cosmos DB requests of
every path the rate takes (the requests the tests count) and their request
units from Microsoft's published per-operation figures, the Service Bus
operations with Standard's throttling credits and the bytes Premium's
messaging units carry, the ceilings they imply (the container or database
throughput, the physical partition, the namespace, the workers, the
subscribers, the relay), which one the rate reaches first, and the
replicas, concurrency, tier and throughput it needs. Every figure is listed
with its source; those Microsoft does not publish are marked estimate. The
defaults are what infra/bicep deploys for the profile.

  orderctl plan -rate 200 -duplicates 0.1 -payments -subscribers loyalty,shipping
  orderctl plan -profile production -rate 1000 -format json

Durations: Go (90s, 1h30m), days (35d, 1d12h) or ISO 8601 (PT1M, P14D).

Flags:
`)
	fs.PrintDefaults()
}
