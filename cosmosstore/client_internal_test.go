package cosmosstore

import (
	"net/http"
	"testing"
)

// The emulator client (InsecureSkipVerify) keeps as many idle connections
// per host as azcosmos's default client, so that a worker with up to 100
// requests in flight reuses its connections instead of dialling one for
// nearly every request (http.DefaultTransport keeps 2 per host).
func TestEmulatorHTTPClient_KeepsIdleConnectionsForConcurrency(t *testing.T) {
	c := emulatorHTTPClient()
	tr, ok := c.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport is %T, want *http.Transport", c.Transport)
	}
	const concurrency = 100 // azcosmos v1.5.0's default client keeps 100 per host
	if tr.MaxIdleConnsPerHost < concurrency {
		t.Errorf("MaxIdleConnsPerHost = %d, want at least %d", tr.MaxIdleConnsPerHost, concurrency)
	}
	if tr.MaxIdleConns != 0 && tr.MaxIdleConns < tr.MaxIdleConnsPerHost {
		t.Errorf("MaxIdleConns = %d, below MaxIdleConnsPerHost %d", tr.MaxIdleConns, tr.MaxIdleConnsPerHost)
	}
	if tr.TLSClientConfig == nil || !tr.TLSClientConfig.InsecureSkipVerify {
		t.Error("the emulator client verifies certificates")
	}
}
