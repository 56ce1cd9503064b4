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
