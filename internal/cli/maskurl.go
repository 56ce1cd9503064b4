package cli

import (
	"net/url"
	"strings"
)

// MaskURL returns raw for logging with what may be secret hidden, as Mask
// hides a key: user information (user:password@) and the query (such as
// ?code=…, an Azure Functions key) and fragment each become "***"; the
// scheme, host and path, which say where the service is, are kept (an
// opaque URL, which names no host, is hidden after its scheme). A URL
// that does not parse has everything from its first '?' or '#' and
// everything between "://" and its last '@' hidden all the same.
func MaskURL(raw string) string {
	if raw == "" {
		return ""
	}
	if u, err := url.Parse(raw); err == nil {
		user := u.User != nil
		u.User = nil
		if u.Opaque != "" { // such as user:SECRET@host, read as scheme "user"
			u.Opaque = "***"
		}
		if u.RawQuery != "" || u.ForceQuery {
			u.RawQuery, u.ForceQuery = "***", false
		}
		if u.Fragment != "" || u.RawFragment != "" {
			u.Fragment, u.RawFragment = "***", ""
		}
		s := u.String()
		if i := strings.Index(s, "//"); user && i >= 0 {
			s = s[:i+2] + "***@" + s[i+2:] // url.User would escape the '*'
		}
		return s
	}
	s := raw
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i+1] + "***"
	}
	if at := strings.LastIndex(s, "@"); at >= 0 {
		start := 0
		if i := strings.Index(s, "://"); i >= 0 && i < at {
			start = i + len("://")
		}
		s = s[:start] + "***" + s[at:]
	}
	return s
}
