// Command maas-api-standin stands in for a tenant's maas-api in the end-to-end tests that run
// the platform on a real node (docs/platform.md §1). It serves, over HTTPS with the
// certificate named by TLS_CERT and TLS_KEY, only what the controller, the kubelet and the
// key-cleanup CronJob call:
//
//	GET    /health                               {"status": "healthy"}
//	GET    /v1/models                            {"object": "list", "data": []}
//	DELETE /internal/v1/tenants/{tenant}/api-keys {"revokedCount": n, "message": ...}
//	POST   /internal/v1/api-keys/cleanup          {"deletedCount": n, "message": ...}
//
// A tenant other than TENANT_NAME (when set) is refused with 400, as is an empty one.
// Under /standin/v1/ it serves what only the tests use: POST .../tenants/{tenant}/api-keys
// makes one active key, GET .../calls lists the internal calls received, GET .../requests
// every request received (method and path as sent, before any cleaning), so a test can show
// that no spelling of an internal path reached maas-api through a Gateway (docs/platform.md
// §5). Every answer says which tenant's pod gave it: X-Standin-Tenant (TENANT_NAME) and
// X-Standin-Pod (the host name, the pod's name).
//
// With --exit-at-start it logs why and exits 1 before listening: a crash-looping maas-api.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
)

type call struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Status int    `json:"status"`
}

// request is one request as it arrived: RequestURI is the target of the request line, so
// "//internal" or "%2e%2e" shows as sent, not as Go's router would clean it. ForwardedFor is
// the X-Forwarded-For a proxy (a Gateway) adds: empty for the kubelet's probes and our
// CronJob's calls.
type request struct {
	Method       string `json:"method"`
	Path         string `json:"path"`
	ForwardedFor string `json:"forwardedFor"`
}

type server struct {
	tenant   string
	pod      string
	mu       sync.Mutex
	keys     map[string]int
	calls    []call
	requests []request
}

func (s *server) record(r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, request{r.Method, r.RequestURI, r.Header.Get("X-Forwarded-For")})
	s.mu.Unlock()
}

func (s *server) reply(w http.ResponseWriter, r *http.Request, status int, body any) {
	if strings.HasPrefix(r.URL.Path, "/internal/") {
		s.mu.Lock()
		s.calls = append(s.calls, call{r.Method, r.URL.Path, status})
		s.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (s *server) checkTenant(w http.ResponseWriter, r *http.Request) (string, bool) {
	tenant := strings.TrimSpace(r.PathValue("tenant"))
	if tenant == "" {
		s.reply(w, r, http.StatusBadRequest, map[string]string{"error": "tenant is required"})
		return "", false
	}
	if s.tenant != "" && tenant != s.tenant {
		s.reply(w, r, http.StatusBadRequest, map[string]string{"error": "tenant mismatch"})
		return "", false
	}
	return tenant, true
}

func (s *server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		s.reply(w, r, http.StatusOK, map[string]string{"status": "healthy"})
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		s.reply(w, r, http.StatusOK, map[string]any{"object": "list", "data": []any{}})
	})
	mux.HandleFunc("DELETE /internal/v1/tenants/{tenant}/api-keys", func(w http.ResponseWriter, r *http.Request) {
		tenant, ok := s.checkTenant(w, r)
		if !ok {
			return
		}
		s.mu.Lock()
		count := s.keys[tenant]
		delete(s.keys, tenant)
		s.mu.Unlock()
		s.reply(w, r, http.StatusOK, map[string]any{
			"revokedCount": count,
			"message":      fmt.Sprintf("revoked %d active API key(s) for tenant %s", count, tenant),
		})
	})
	mux.HandleFunc("POST /internal/v1/api-keys/cleanup", func(w http.ResponseWriter, r *http.Request) {
		s.reply(w, r, http.StatusOK, map[string]any{
			"deletedCount": 0,
			"message":      "deleted 0 expired ephemeral key(s)",
		})
	})
	mux.HandleFunc("POST /standin/v1/tenants/{tenant}/api-keys", func(w http.ResponseWriter, r *http.Request) {
		tenant, ok := s.checkTenant(w, r)
		if !ok {
			return
		}
		s.mu.Lock()
		s.keys[tenant]++
		count := s.keys[tenant]
		s.mu.Unlock()
		s.reply(w, r, http.StatusCreated, map[string]int{"activeCount": count})
	})
	mux.HandleFunc("GET /standin/v1/calls", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		calls := append([]call{}, s.calls...)
		s.mu.Unlock()
		s.reply(w, r, http.StatusOK, calls)
	})
	mux.HandleFunc("GET /standin/v1/requests", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		requests := append([]request{}, s.requests...)
		s.mu.Unlock()
		s.reply(w, r, http.StatusOK, requests)
	})
	return mux
}

func main() {
	exitAtStart := flag.Bool("exit-at-start", false, "log and exit 1 at once (a crash loop)")
	addr := flag.String("listen", ":8443", "address to serve HTTPS on")
	flag.Parse()
	if *exitAtStart {
		log.Print("maas-api stand-in: exiting at start (--exit-at-start)")
		os.Exit(1)
	}
	cert, key := os.Getenv("TLS_CERT"), os.Getenv("TLS_KEY")
	if cert == "" || key == "" {
		log.Fatal("maas-api stand-in: TLS_CERT and TLS_KEY must name the serving certificate")
	}
	pod, _ := os.Hostname()
	s := &server{tenant: os.Getenv("TENANT_NAME"), pod: pod, keys: map[string]int{}}
	mux := s.routes()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Printf("%s %s from %s", r.Method, r.RequestURI, r.RemoteAddr)
		s.record(r)
		w.Header().Set("X-Standin-Tenant", s.tenant)
		w.Header().Set("X-Standin-Pod", s.pod)
		mux.ServeHTTP(w, r)
	})
	log.Printf("maas-api stand-in for tenant %q on %s", s.tenant, *addr)
	log.Fatal(http.ListenAndServeTLS(*addr, cert, key, handler))
}
