package cosmosstore_test

import (
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

func TestNewClientFromConnectionString(t *testing.T) {
	key := cosmiumtest.Key
	tests := []struct {
		name         string
		conn         string
		wantEndpoint string // empty: an error is expected
	}{
		{"emulator form", "AccountEndpoint=http://127.0.0.1:8081/;AccountKey=" + key + ";", "http://127.0.0.1:8081/"},
		{"no trailing semicolon", "AccountEndpoint=https://acct.documents.azure.com:443/;AccountKey=" + key, "https://acct.documents.azure.com:443/"},
		{"key first, any case, spaces", " accountkey=" + key + " ; ACCOUNTENDPOINT=http://localhost:8081/ ", "http://localhost:8081/"},
		{"other keys ignored", "AccountEndpoint=http://localhost:8081/;AccountKey=" + key + ";DisableServerCertificateValidation=True;", "http://localhost:8081/"},
		{"no endpoint", "AccountKey=" + key + ";", ""},
		{"no key", "AccountEndpoint=http://localhost:8081/;", ""},
		{"empty", "", ""},
		{"segment without =", "AccountEndpoint=http://localhost:8081/;" + key + ";", ""},
		{"key not base64", "AccountEndpoint=http://localhost:8081/;AccountKey=" + key[:10] + "!!;", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := cosmosstore.NewClientFromConnectionString(tt.conn, nil)
			if tt.wantEndpoint == "" {
				if err == nil {
					c.Close()
					t.Fatal("NewClientFromConnectionString succeeded, want an error")
				}
				if strings.Contains(err.Error(), key[:10]) {
					t.Errorf("error %q repeats the account key", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewClientFromConnectionString = %v", err)
			}
			defer c.Close()
			if got := c.Endpoint(); got != tt.wantEndpoint {
				t.Errorf("Endpoint() = %q, want %q", got, tt.wantEndpoint)
			}
		})
	}
}

func TestNew_Arguments(t *testing.T) {
	if _, err := cosmosstore.New(nil, "db", "c", "/tenantId"); err == nil {
		t.Error("New(nil, ...) succeeded")
	}
	c, err := cosmosstore.NewClientWithKey("http://127.0.0.1:8081/", cosmiumtest.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, names := range [][2]string{{"", "c"}, {"db", ""}} {
		if _, err := cosmosstore.New(c, names[0], names[1], "/tenantId"); err == nil {
			t.Errorf("New(c, %q, %q, ...) succeeded", names[0], names[1])
		}
	}
	if _, err := cosmosstore.NewClient("https://acct.documents.azure.com:443/", nil, nil); err == nil {
		t.Error("NewClient without a credential succeeded")
	}
}

// The partition key path is required and must be one top-level field: the
// store writes its name into ReadPartition's query and Check's probe.
func TestNew_PartitionKeyPath(t *testing.T) {
	c, err := cosmosstore.NewClientWithKey("http://127.0.0.1:8081/", cosmiumtest.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tests := []struct {
		path string
		want string // a part of the error; empty: accepted
	}{
		{path: "/tenantId"},
		{path: "/pk"},
		{path: "/a1"},
		{path: "", want: "no partition key path"},
		{path: "/", want: `"/"`},
		{path: "tenantId", want: `"tenantId"`},
		{path: "/a/b", want: `"/a/b"`},
		{path: "/tenant-id", want: `"/tenant-id"`},
		{path: "/1a", want: `"/1a"`},
		{path: "/a b", want: `"/a b"`},
		{path: "/a') OR true --", want: "top-level field"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			s, err := cosmosstore.New(c, "db", "c", tt.path)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("New(%q) = %v", tt.path, err)
				}
				if got := s.PartitionKeyPath(); got != tt.path {
					t.Errorf("PartitionKeyPath() = %q, want %q", got, tt.path)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New(%q) = %v, want an error containing %q", tt.path, err, tt.want)
			}
			err = cosmosstore.CreateDatabaseAndContainer(t.Context(), c, "db", "c", tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CreateDatabaseAndContainer(%q) = %v, want an error containing %q before any request", tt.path, err, tt.want)
			}
		})
	}
}
