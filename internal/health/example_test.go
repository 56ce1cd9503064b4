package health_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/health"
)

// A program adds its checks, starts the listener, calls Started once its
// start-up checks passed and Draining at the first signal.
func ExampleStatus() {
	s := health.NewStatus()
	s.AddReady("store", func(ctx context.Context) error { return nil })
	srv, err := health.Listen("127.0.0.1:0", s.Handler(nil), slog.New(slog.DiscardHandler))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(5 * time.Second)
	get := func() {
		resp, err := http.Get("http://" + srv.Addr().String() + "/readyz")
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d %q\n", resp.StatusCode, b)
	}
	get()
	s.Started()
	get()
	s.Draining("terminated signal received")
	get()
	// Output:
	// 503 "fail started: the start-up checks have not passed yet\nok store\n"
	// 200 "ok started\nok store\n"
	// 503 "ok started\nfail draining: terminated signal received\nok store\n"
}
