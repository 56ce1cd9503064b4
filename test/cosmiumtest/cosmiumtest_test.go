package cosmiumtest_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

func newClient(t *testing.T, s *cosmiumtest.Server) *azcosmos.Client {
	t.Helper()
	cred, err := azcosmos.NewKeyCredential(s.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := azcosmos.NewClientWithKey(s.Endpoint, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestStart_ServesCosmosDBOnLoopback(t *testing.T) {
	s := cosmiumtest.Start(t)
	u, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(u.Hostname()); u.Scheme != "http" || ip == nil || !ip.IsLoopback() || u.Path != "/" {
		t.Errorf("Endpoint = %q, want http://<loopback address>:PORT/", s.Endpoint)
	}
	if s.Key != cosmiumtest.Key {
		t.Errorf("Key = %q, want the well-known emulator key", s.Key)
	}
	c := newClient(t, s)
	if _, err := c.CreateDatabase(t.Context(), azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatalf("CreateDatabase = %v", err)
	}
	_, err = c.CreateDatabase(t.Context(), azcosmos.DatabaseProperties{ID: "db"}, nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 409 {
		t.Errorf("second CreateDatabase = %v, want a 409 response", err)
	}
}

func TestStart_EachServerIsEmptyAndSeparate(t *testing.T) {
	a, b := cosmiumtest.Start(t), cosmiumtest.Start(t)
	if a.Endpoint == b.Endpoint {
		t.Fatalf("two servers share the endpoint %s", a.Endpoint)
	}
	if _, err := newClient(t, a).CreateDatabase(t.Context(), azcosmos.DatabaseProperties{ID: "only-in-a"}, nil); err != nil {
		t.Fatal(err)
	}
	db, err := newClient(t, b).NewDatabase("only-in-a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Read(t.Context(), nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 404 {
		t.Errorf("reading a's database from b = %v, want 404", err)
	}
}

func TestStart_IgnoresCosmiumEnvironment(t *testing.T) {
	// Cosmium lets COSMIUM_<FLAG> variables override its flags; the server
	// must still listen where Start says, with TLS off.
	t.Setenv("COSMIUM_PORT", "1")
	t.Setenv("COSMIUM_DISABLETLS", "false")
	t.Setenv("COSMIUM_ACCOUNTKEY", "b3RoZXI=")
	s := cosmiumtest.Start(t)
	if _, err := newClient(t, s).CreateDatabase(t.Context(), azcosmos.DatabaseProperties{ID: "db"}, nil); err != nil {
		t.Fatalf("CreateDatabase = %v", err)
	}
}

func TestClose_StopsTheServerAndIsIdempotent(t *testing.T) {
	s, err := cosmiumtest.NewServer(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(s.Endpoint, "http://"), "/")
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if conn, err := net.Dial("tcp", addr); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Close", addr)
	}
}

func TestBinary_BuiltOnceAndCached(t *testing.T) {
	if os.Getenv(cosmiumtest.BinaryEnv) != "" {
		t.Skipf("%s is set: the prebuilt binary is used and nothing is built", cosmiumtest.BinaryEnv)
	}
	p1, err := cosmiumtest.Binary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p2, err := cosmiumtest.Binary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if p1 != p2 {
		t.Errorf("Binary returned %q, then %q", p1, p2)
	}
	fi, err := os.Stat(p1)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || runtime.GOOS != "windows" && fi.Mode()&0o111 == 0 {
		t.Errorf("%s: mode %v, want an executable file", p1, fi.Mode())
	}
	if dir := filepath.Base(filepath.Dir(p1)); dir != "cosmium-"+cosmiumtest.Version+"-bound" {
		t.Errorf("binary directory %q does not name version %s", dir, cosmiumtest.Version)
	}
}

func TestBinary_PrebuiltFromEnvironment(t *testing.T) {
	built, err := cosmiumtest.Binary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(cosmiumtest.BinaryEnv, built)
	got, err := cosmiumtest.Binary(t.Context())
	if err != nil || got != built {
		t.Errorf("Binary with %s=%s = %q, %v", cosmiumtest.BinaryEnv, built, got, err)
	}
	missing := filepath.Join(t.TempDir(), "no-cosmium")
	t.Setenv(cosmiumtest.BinaryEnv, missing)
	if _, err := cosmiumtest.Binary(t.Context()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Binary with %s=%s = %v, want a not-exist error", cosmiumtest.BinaryEnv, missing, err)
	}
	if _, err := cosmiumtest.NewServer(context.Background()); err == nil {
		t.Errorf("NewServer with a missing %s succeeded", cosmiumtest.BinaryEnv)
	}
}

// The cache directory is named after Version, so Version must be what the
// tools module builds, or a stale binary would be used.
func TestVersion_MatchesToolsModule(t *testing.T) {
	f, err := os.Open(filepath.Join("tools", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var required, tool bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 2 && fields[0] == "github.com/pikami/cosmium":
			required = true
			if fields[1] != cosmiumtest.Version {
				t.Errorf("tools/go.mod requires cosmium %s, cosmiumtest.Version is %s", fields[1], cosmiumtest.Version)
			}
		case len(fields) == 2 && fields[0] == "tool" && fields[1] == "github.com/pikami/cosmium/cmd/server":
			tool = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !required || !tool {
		t.Errorf("tools/go.mod: cosmium required %v, tool directive %v; want both", required, tool)
	}
}
