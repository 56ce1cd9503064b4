package infra

import (
	"fmt"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

// ParseDuration parses the ISO 8601 durations Service Bus and the templates
// use, such as PT1M, PT30S, P14D or P1DT12H, with the same parser the
// commands use for these settings. Years and months are refused: their
// length depends on the calendar.
func ParseDuration(s string) (time.Duration, error) {
	d, err := cli.ParseISO8601(s)
	if err != nil {
		return 0, fmt.Errorf("infra: %w", err)
	}
	return d, nil
}

// DurationProperties lists the string properties the templates set whose
// value Azure reads as an ISO 8601 duration, with where that is documented.
// The key is the lower-case resource type, a space, and the property path
// without array indices, as in OpenEnums. The type data types them as plain
// strings, so without this table a window of 'PT15' (no unit) or '15m' would
// pass the typed check and fail only at deployment; TypeData.Check reports a
// literal that ParseDuration refuses.
var DurationProperties = map[string]string{
	"microsoft.insights/scheduledqueryrules properties.evaluationFrequency":                    scheduledQueryRulesDurations,
	"microsoft.insights/scheduledqueryrules properties.windowSize":                             scheduledQueryRulesDurations,
	"microsoft.insights/scheduledqueryrules properties.muteActionsDuration":                    scheduledQueryRulesDurations,
	"microsoft.insights/scheduledqueryrules properties.overrideQueryTimeRange":                 scheduledQueryRulesDurations,
	"microsoft.insights/metricalerts properties.evaluationFrequency":                           metricAlertsDurations,
	"microsoft.insights/metricalerts properties.windowSize":                                    metricAlertsDurations,
	"microsoft.servicebus/namespaces/queues properties.lockDuration":                           serviceBusDurations,
	"microsoft.servicebus/namespaces/queues properties.defaultMessageTimeToLive":               serviceBusDurations,
	"microsoft.servicebus/namespaces/queues properties.duplicateDetectionHistoryTimeWindow":    serviceBusDurations,
	"microsoft.servicebus/namespaces/topics properties.defaultMessageTimeToLive":               serviceBusDurations,
	"microsoft.servicebus/namespaces/topics properties.duplicateDetectionHistoryTimeWindow":    serviceBusDurations,
	"microsoft.servicebus/namespaces/topics/subscriptions properties.lockDuration":             serviceBusDurations,
	"microsoft.servicebus/namespaces/topics/subscriptions properties.defaultMessageTimeToLive": serviceBusDurations,
}

const (
	scheduledQueryRulesDurations = `Scheduled Query Rules REST API 2023-12-01: evaluationFrequency, windowSize, muteActionsDuration and overrideQueryTimeRange are "represented in ISO 8601 duration format", https://learn.microsoft.com/rest/api/monitor/scheduled-query-rules/create-or-update`
	metricAlertsDurations        = `Metric Alerts REST API: evaluationFrequency and windowSize "in ISO 8601 duration format", https://learn.microsoft.com/rest/api/monitor/metric-alerts/create-or-update`
	serviceBusDurations          = `Service Bus queues, topics and subscriptions REST API: lockDuration, defaultMessageTimeToLive and duplicateDetectionHistoryTimeWindow are "ISO 8601" timespans, https://learn.microsoft.com/rest/api/servicebus/controlplane-stable/queues/create-or-update`
)
