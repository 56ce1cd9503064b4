package cli

import (
	"fmt"
	"net"
)

// CheckLoopback reports a listen address whose host is not a loopback IP or
// "localhost", naming setting (such as "PAYMENTS_ADDR (-addr)") and the
// -allow-remote flag that accepts it anyway. An empty host (":8090")
// listens on every interface and is refused too. It is the rule of the
// local tools that have no TLS and no authentication of their own (the
// test broker, the reference payments service): they listen where only
// this machine reaches them unless asked.
func CheckLoopback(setting, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %w", setting, addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	where := "is not a loopback address"
	if host == "" {
		where = "listens on every interface"
	}
	return fmt.Errorf("%s %q %s; give -allow-remote to listen on it anyway", setting, addr, where)
}
