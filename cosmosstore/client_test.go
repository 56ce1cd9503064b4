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
	if _, err := cosmosstore.New(nil, "db", "c"); err == nil {
		t.Error("New(nil, ...) succeeded")
	}
	c, err := cosmosstore.NewClientWithKey("http://127.0.0.1:8081/", cosmiumtest.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, names := range [][2]string{{"", "c"}, {"db", ""}} {
		if _, err := cosmosstore.New(c, names[0], names[1]); err == nil {
			t.Errorf("New(c, %q, %q) succeeded", names[0], names[1])
		}
	}
	if _, err := cosmosstore.NewClient("https://acct.documents.azure.com:443/", nil, nil); err == nil {
		t.Error("NewClient without a credential succeeded")
	}
}
