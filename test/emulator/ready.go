package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// A Probe asks a service once whether it is ready; nil means ready. It must
// return when ctx is done.
type Probe func(ctx context.Context) error

// ErrRefused marks a probe answer that waiting cannot change, such as a
// wrong key: WaitReady returns it at once instead of polling to the deadline.
var ErrRefused = errors.New("emulator: refused")

// WaitReady calls probe every interval until it returns nil, and returns nil
// then. It returns a probe error wrapping ErrRefused at once. When ctx ends
// first it returns an error wrapping ctx's error and the probe's last error,
// so the caller can say what was not ready and why.
//
// An accepted TCP connection is not readiness: Docker's port proxy accepts
// connections on a published port before the process in the container
// listens, so the tests probe each emulator with a real request.
func WaitReady(ctx context.Context, interval time.Duration, probe Probe) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := probe(ctx)
		if err == nil || errors.Is(err, ErrRefused) {
			return err
		}
		select {
		case <-ctx.Done():
		case <-t.C:
			// A tick and the context's end may come together, and select
			// picks either: never probe once the context has ended.
			if ctx.Err() == nil {
				continue
			}
		}
		return fmt.Errorf("emulator: not ready: %w (last probe: %w)", ctx.Err(), err)
	}
}

// HTTPHealthProbe returns a Probe that GETs url with client and is ready on
// a 200 response. The Service Bus emulator answers GET /health on its
// management port, 5300, once it has read Config.json and reached its
// database. Each request is bounded by the context WaitReady passes and by
// client's own timeout.
func HTTPHealthProbe(client *http.Client, url string) Probe {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %q", url, resp.Status, body)
		}
		return nil
	}
}

// CosmosProbe returns a Probe that reads a database through client, with the
// same gateway and key the worker uses, and is ready when the gateway
// answers: with the database, or with 404 Not Found for one that does not
// exist yet. 401 and 403 (a wrong key, or another server on the port) wrap
// ErrRefused. Any other answer, or none, is not ready. The Cosmos DB emulator
// accepts connections on 8081 well before its gateway serves requests.
func CosmosProbe(client *azcosmos.Client) Probe {
	return func(ctx context.Context) error {
		db, err := client.NewDatabase("readiness-probe")
		if err != nil {
			return err
		}
		_, err = db.Read(ctx, nil)
		var re *azcore.ResponseError
		switch {
		case errors.As(err, &re) && re.StatusCode == http.StatusNotFound:
			return nil
		case errors.As(err, &re) && (re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden):
			return fmt.Errorf("%w: %w", ErrRefused, err)
		}
		return err
	}
}

// ErrWeakPassword reports a password that SQL Server's (and SQL Edge's)
// policy for the sa login refuses; the database then does not start, and
// the Service Bus emulator with it.
var ErrWeakPassword = errors.New("emulator: password does not meet SQL Server's policy")

// CheckSAPassword applies SQL Server's password policy for the sa login:
// 8 to 128 characters, from at least three of the four classes upper-case
// letters, lower-case letters, digits and other characters.
func CheckSAPassword(pw string) error {
	n := len([]rune(pw))
	if n < 8 || n > 128 {
		return fmt.Errorf("%w: %d characters, want 8 to 128", ErrWeakPassword, n)
	}
	var upper, lower, digit, other int
	for _, r := range pw {
		switch {
		case unicode.IsUpper(r):
			upper = 1
		case unicode.IsLower(r):
			lower = 1
		case unicode.IsDigit(r):
			digit = 1
		default:
			other = 1
		}
	}
	if upper+lower+digit+other < 3 {
		return fmt.Errorf("%w: want characters from three of upper case, lower case, digits and symbols", ErrWeakPassword)
	}
	return nil
}
