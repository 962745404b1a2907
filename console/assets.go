package console

import (
	"embed"
	"net/http"
	"path"
)

//go:embed static
var staticFS embed.FS

var staticTypes = map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}

// serveStatic serves the embedded stylesheet, script and icon. They need
// no sign-in: they are the same in every binary of a version.
func serveStatic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := staticFS.ReadFile("static/" + name)
	ct := staticTypes[path.Ext(name)]
	if err != nil || ct == "" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_, _ = w.Write(b)
}
