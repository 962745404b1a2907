package khala

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/khala/pgtest"
)

// People are managed in the file, through the server that holds it, or in
// PostgreSQL; a person removed through the server is refused at once.
func TestUsersEveryWay(t *testing.T) {
	db := filepath.Join(t.TempDir(), "khala.db")
	out, via, err := UsersAt(t.Context(), db, UserRequest{Action: "add", Name: "alice"})
	if err != nil || via != ViaDatabase || len(out) != 1 || !strings.HasPrefix(out[0].Token, prefixPerson) {
		t.Fatalf("add without a server: %+v %s %v", out, via, err)
	}
	alice := out[0].Token
	url, _ := serveInBackground(t, db)
	out, via, err = UsersAt(t.Context(), db, UserRequest{Action: "add", Name: "bob"})
	if err != nil || via != ViaServer || len(out) != 1 || out[0].Name != "bob" || !strings.HasPrefix(out[0].Token, prefixPerson) {
		t.Fatalf("add through the server: %+v %s %v", out, via, err)
	}
	if _, _, err := UsersAt(t.Context(), db, UserRequest{Action: "add", Name: "bob"}); !IsRefusal(err) || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("bob twice through the server: %v", err)
	}
	if _, _, err := UsersAt(t.Context(), db, UserRequest{Action: "add", Name: "Bad Name"}); !IsRefusal(err) {
		t.Fatalf("a bad name through the server: %v", err)
	}
	list, _, err := UsersAt(t.Context(), db, UserRequest{Action: "list"})
	if err != nil || len(list) != 2 || list[0].Name != "alice" || list[1].Name != "bob" || list[0].Token != "" {
		t.Fatalf("list: %+v %v", list, err)
	}
	ts := &testServer{t: t, URL: url, client: http.DefaultClient}
	c := &client{ts: ts, token: alice}
	c.must("GET", "/v1/inbox", nil, 200, nil)
	if _, _, err := UsersAt(t.Context(), db, UserRequest{Action: "remove", Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	if status, _ := c.do("GET", "/v1/inbox", nil); status != 401 {
		t.Fatalf("a removed person's token: %d", status)
	}
	if _, _, err := UsersAt(t.Context(), db, UserRequest{Action: "remove", Name: "alice"}); !IsRefusal(err) {
		t.Fatalf("removing alice twice: %v", err)
	}
}

func TestUsersInPostgres(t *testing.T) {
	dsn := pgtest.Database(t)
	out, err := UsersInPostgres(t.Context(), dsn, UserRequest{Action: "add", Name: "alice"})
	if err != nil || len(out) != 1 || out[0].Token == "" {
		t.Fatalf("add: %+v %v", out, err)
	}
	if _, err := UsersInPostgres(t.Context(), dsn, UserRequest{Action: "add", Name: "alice"}); !IsRefusal(err) {
		t.Fatalf("alice twice: %v", err)
	}
	if list, err := UsersInPostgres(t.Context(), dsn, UserRequest{Action: "list"}); err != nil || len(list) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := UsersInPostgres(t.Context(), dsn, UserRequest{Action: "remove", Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	if list, err := UsersInPostgres(t.Context(), dsn, UserRequest{Action: "list"}); err != nil || len(list) != 0 {
		t.Fatalf("list after remove: %+v %v", list, err)
	}
}
