// Command cosmium runs the cosmium Cosmos DB emulator (github.com/pikami/cosmium
// v0.1.20, MIT) listening only on the address its -Host flag names.
//
// Cosmium's own server (github.com/pikami/cosmium/cmd/server) listens on every
// interface whatever -Host says: api/router.go builds its listen address as
// fmt.Sprintf(":%d", s.config.Port) (line 91 in v0.1.20), and -Host only sets
// the host name it advertises (api/config/config.go, lines 19 and 54-56).
// With the well-known emulator key, and with every path under /cosmium (such
// as GET /cosmium/export, which returns every database, container and
// document) served without authentication
// (api/handlers/middleware/authentication.go, lines 16-18), that exposes the
// emulator to the whole network.
//
// This command serves cosmium's own request router (the same handlers, the
// same store) on a listener bound to -Host:-Port, so that
// "-Host 127.0.0.1" means loopback only. It takes cosmium's flags and
// COSMIUM_* environment variables unchanged. It serves plain HTTP with
// -DisableTls, or TLS with -Cert and -CertKey; cosmium's built-in
// self-signed certificate lives in an internal package this command cannot
// use, so TLS without -Cert is refused.
//
// Build it from this module:
//
//	go -C test/cosmiumtest/tools build -o /tmp/cosmium ./cmd/cosmium
//	/tmp/cosmium -Host 127.0.0.1 -Port 8081 -DisableTls -LogLevel error
//
// When cosmium is updated, check that api.NewApiServer still takes the
// repository and the configuration and that the repository still has
// LoadStateJSON, LoadStateFS and SaveStateFS: this command fails at start if
// not, and cosmiumtest's TestStart_NotReachableOffLoopback and the cosmosstore
// tests against cosmium run it.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"strconv"
	"syscall"
	"time"

	"github.com/pikami/cosmium/api"
	"github.com/pikami/cosmium/api/config"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cosmium:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := config.ParseFlags()
	if !cfg.DisableTls && (cfg.TLS_CertificatePath == "" || cfg.TLS_CertificateKey == "") {
		return errors.New("this build serves TLS only with -Cert and -CertKey; pass them, or -DisableTls")
	}
	repo, err := newRepository(cfg)
	if err != nil {
		return err
	}
	server, err := newAPIServer(repo, &cfg)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: server.GetRouter(), ReadHeaderTimeout: 30 * time.Second}
	serveErr := make(chan error, 1)
	go func() {
		if cfg.DisableTls {
			serveErr <- srv.Serve(l)
		} else {
			serveErr <- srv.ServeTLS(l, cfg.TLS_CertificatePath, cfg.TLS_CertificateKey)
		}
	}()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	select {
	case err := <-serveErr:
		return err
	case <-sigs:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(ctx)
	if cfg.PersistDataFilePath != "" {
		call(repo, "SaveStateFS", cfg.PersistDataFilePath)
	}
	return err
}

// newRepository returns cosmium's data repository, as cosmium's server
// creates it. The repository's type is in an internal package of cosmium, so
// it is made through reflection from the parameter type of
// api.NewApiServer, and initialised with its exported methods:
// LoadStateJSON("{}") makes every map NewDataRepository makes, LoadStateFS
// loads -InitialData or an existing -Persist file as InitializeRepository
// does.
func newRepository(cfg config.ServerConfig) (reflect.Value, error) {
	repoType := reflect.TypeOf(api.NewApiServer).In(0)
	if repoType.Kind() != reflect.Pointer || repoType.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, fmt.Errorf("unexpected repository type %v", repoType)
	}
	repo := reflect.New(repoType.Elem())
	if out := call(repo, "LoadStateJSON", "{}"); len(out) != 1 || !out[0].IsNil() {
		return reflect.Value{}, fmt.Errorf("initialise the repository: %v", out)
	}
	switch {
	case cfg.InitialDataFilePath != "":
		call(repo, "LoadStateFS", cfg.InitialDataFilePath)
	case cfg.PersistDataFilePath != "":
		if fi, err := os.Stat(cfg.PersistDataFilePath); err == nil {
			if fi.IsDir() {
				return reflect.Value{}, errors.New("argument '-Persist' must be a path to file, not a directory")
			}
			call(repo, "LoadStateFS", cfg.PersistDataFilePath)
		}
	}
	return repo, nil
}

// newAPIServer calls api.NewApiServer with the repository.
func newAPIServer(repo reflect.Value, cfg *config.ServerConfig) (*api.ApiServer, error) {
	out := reflect.ValueOf(api.NewApiServer).Call([]reflect.Value{repo, reflect.ValueOf(cfg)})
	s, ok := out[0].Interface().(*api.ApiServer)
	if !ok || s == nil || s.GetRouter() == nil {
		return nil, errors.New("cosmium's API server has no router")
	}
	return s, nil
}

// call calls the exported method name of v with string arguments.
func call(v reflect.Value, name string, args ...string) []reflect.Value {
	m := v.MethodByName(name)
	if !m.IsValid() {
		panic("cosmium repository has no method " + name)
	}
	in := make([]reflect.Value, len(args))
	for i, a := range args {
		in[i] = reflect.ValueOf(a)
	}
	return m.Call(in)
}
