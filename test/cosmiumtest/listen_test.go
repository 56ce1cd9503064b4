package cosmiumtest_test

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// ownAddresses returns this machine's own unicast addresses that are not
// loopback (link-local IPv6 addresses need a zone and are left out).
func ownAddresses(t *testing.T) []net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var ips []net.IP
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() || n.IP.IsMulticast() || n.IP.IsUnspecified() {
			continue
		}
		ips = append(ips, n.IP)
	}
	return ips
}

// Cosmium's own server listens on every interface (api/router.go line 91 of
// v0.1.20); the build this package runs must listen on loopback only. The
// test connects only to this machine's own addresses. A listener on every
// interface, opened by the test on the same machine, shows that each address
// is reachable at all, so a refused connection to cosmium means cosmium does
// not listen there.
func TestStart_NotReachableOffLoopback(t *testing.T) {
	ips := ownAddresses(t)
	if len(ips) == 0 {
		t.Skip("this machine has no address other than loopback to try")
	}
	s := cosmiumtest.Start(t)
	u, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()

	control, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()
	go func() {
		for {
			c, err := control.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	controlPort := strconv.Itoa(control.Addr().(*net.TCPAddr).Port)

	d := net.Dialer{Timeout: 5 * time.Second}
	for _, ip := range ips {
		if c, err := d.DialContext(t.Context(), "tcp", net.JoinHostPort(ip.String(), controlPort)); err != nil {
			t.Logf("%s is not reachable on this machine even for a listener on every interface (%v); not a test of cosmium", ip, err)
			continue
		} else {
			c.Close()
		}
		c, err := d.DialContext(t.Context(), "tcp", net.JoinHostPort(ip.String(), port))
		if err == nil {
			c.Close()
			t.Errorf("cosmium accepts connections on %s, port %s: it must listen on loopback only", ip, port)
			continue
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("connecting to cosmium on %s: %v, want connection refused", ip, err)
		}
	}
	// It still answers on loopback.
	c, err := d.DialContext(t.Context(), "tcp", u.Host)
	if err != nil {
		t.Fatalf("cosmium does not answer on %s: %v", u.Host, err)
	}
	c.Close()
}
