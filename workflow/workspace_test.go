package workflow

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// cloudRoles is twoRoles as a cloud workflow (no adapters needed).
var cloudRoles = strings.Replace(twoRoles, "binding: local", "binding: cloud", 1)

func TestWorkspaceDefinitions(t *testing.T) {
	n := strings.Count(twoRoles, "\n") // workspace: is on line n+1, its keys below
	good := []struct {
		name, src string
		want      *WorkspaceSpec
	}{
		{"none", twoRoles, nil},
		{"defaults", twoRoles + "workspace:\n", &WorkspaceSpec{}},
		{"empty mapping", twoRoles + "workspace: {}\n", &WorkspaceSpec{}},
		{"local path and branch", twoRoles + "workspace: {repo: ., base: main}\n", &WorkspaceSpec{Repo: ".", Base: "main"}},
		{"local revision expression", twoRoles + "workspace:\n  base: HEAD~2\n", &WorkspaceSpec{Base: "HEAD~2"}},
		{"tag peeled", twoRoles + "workspace:\n  base: v1.0^{commit}\n", &WorkspaceSpec{Base: "v1.0^{commit}"}},
		{"cloud https", cloudRoles + "workspace: {repo: 'https://git.example.com/team/app.git', base: main}\n",
			&WorkspaceSpec{Repo: "https://git.example.com/team/app.git", Base: "main"}},
		{"cloud scp-like", cloudRoles + "workspace: {repo: 'git@github.com:team/app.git'}\n", &WorkspaceSpec{Repo: "git@github.com:team/app.git"}},
		{"cloud ssh URL with user", cloudRoles + "workspace: {repo: 'ssh://git@host:2222/app.git'}\n", &WorkspaceSpec{Repo: "ssh://git@host:2222/app.git"}},
		{"cloud shared disk", cloudRoles + "workspace: {repo: /srv/git/app.git}\n", &WorkspaceSpec{Repo: "/srv/git/app.git"}},
		{"cloud file URL", cloudRoles + "workspace: {repo: 'file:///srv/git/app.git'}\n", &WorkspaceSpec{Repo: "file:///srv/git/app.git"}},
		{"cloud repo per run", cloudRoles + "workspace: {base: main}\n", &WorkspaceSpec{Base: "main"}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse("pair.yaml", []byte(tc.src), nil)
			if err != nil {
				t.Fatal(err)
			}
			if (d.Workspace == nil) != (tc.want == nil) || (d.Workspace != nil && *d.Workspace != *tc.want) {
				t.Fatalf("workspace %+v, want %+v", d.Workspace, tc.want)
			}
		})
	}
	bad := []struct {
		name, src string
		line      int
		field     string
		want      string
	}{
		{"repo given empty", twoRoles + "workspace:\n  repo: \"\"\n", n + 2, "workspace.repo", "is empty"},
		{"repo given null", twoRoles + "workspace:\n  repo:\n", n + 2, "workspace.repo", "is empty"},
		{"repo an option", twoRoles + "workspace:\n  repo: --upload-pack=x\n", n + 2, "workspace.repo", "not a path"},
		{"unknown key", twoRoles + "workspace:\n  repo: .\n  branch: x\n", n + 3, "workspace.branch", `unknown key "branch"`},
		{"misspelt key", twoRoles + "workspace:\n  bsae: main\n", n + 2, "workspace.bsae", `did you mean "base"`},
		{"not a mapping", twoRoles + "workspace: [main]\n", n + 1, "workspace", "want a mapping, got a list"},
		{"base empty", twoRoles + "workspace:\n  base: \"\"\n", n + 2, "workspace.base", "is empty"},
		{"base a range", twoRoles + "workspace:\n  base: main..dev\n", n + 2, "workspace.base", "is a range"},
		{"base an option", twoRoles + "workspace:\n  base: --all\n", n + 2, "workspace.base", "must not start with '-'"},
		{"base with space", twoRoles + "workspace:\n  base: my branch\n", n + 2, "workspace.base", "must not contain spaces"},
		{"base a path", twoRoles + "workspace:\n  base: 'HEAD:README'\n", n + 2, "workspace.base", "':'"},
		{"cloud repo empty", cloudRoles + "workspace:\n  repo: ''\n", n + 2, "workspace.repo", "--repo"},
		{"cloud repo relative", cloudRoles + "workspace:\n  repo: .\n", n + 2, "workspace.repo", "reachable by every serving agent"},
		{"cloud repo relative dir", cloudRoles + "workspace:\n  repo: src/app\n", n + 2, "workspace.repo", "reachable by every serving agent"},
		{"cloud repo password", cloudRoles + "workspace:\n  repo: 'https://bob:s3cret@git.example.com/app.git'\n", n + 2, "workspace.repo", "password"},
		{"cloud repo scheme", cloudRoles + "workspace:\n  repo: 'ftp://host/app.git'\n", n + 2, "workspace.repo", "unsupported scheme"},
		{"name no branch can hold", strings.Replace(twoRoles, "workflow: pair", "workflow: pair..x", 1) + "workspace:\n", 1, "workflow", "cannot be part of its threads' branches"},
		{"name ending .lock", strings.Replace(twoRoles, "workflow: pair", "workflow: pair.lock", 1) + "workspace:\n", 1, "workflow", ".lock"},
		{"cloud repo no host", cloudRoles + "workspace:\n  repo: 'https:///app.git'\n", n + 2, "workspace.repo", "no host"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("pair.yaml", []byte(tc.src), nil)
			var fes yamlfile.Errors
			if !errors.As(err, &fes) || len(fes) != 1 {
				t.Fatalf("want one file error, got %v", err)
			}
			fe := fes[0]
			if fe.File != "pair.yaml" || fe.Line != tc.line || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.want) {
				t.Fatalf("got %s (line %d, field %q), want line %d, field %q, containing %q", fe, fe.Line, fe.Field, tc.line, tc.field, tc.want)
			}
			if fes.ExitCode() != 2 {
				t.Fatal("a bad workspace is a config error (exit 2)")
			}
		})
	}
}

func TestCheckBranch(t *testing.T) {
	for _, ok := range []string{"nerve/code-review/thread-7", "feature/x", "fix-1.2", "a@b", "user/ünïcode"} {
		if err := CheckBranch(ok); err != nil {
			t.Errorf("CheckBranch(%q) = %v, want ok", ok, err)
		}
	}
	for _, bad := range []string{"", "-x", "a..b", "has space", "a~1", "a^", "a:b", "a?", "a*", "a[b", `a\b`, "a@{1}", "/a", "a/",
		"a//b", ".a", "a/.b", "a.lock", "a/b.lock/c", "a.", "HEAD", "@", "refs/heads/x", "tab\there", "del\x7f"} {
		if err := CheckBranch(bad); err == nil {
			t.Errorf("CheckBranch(%q) accepted a name git refuses", bad)
		}
	}
}

func TestCheckRevisionAndCommit(t *testing.T) {
	for _, ok := range []string{"main", "HEAD", "HEAD~2", "origin/main", "v1.0^{commit}", "a1b2c3d", "@{upstream}"} {
		if err := CheckRevision(ok); err != nil {
			t.Errorf("CheckRevision(%q) = %v", ok, err)
		}
	}
	if !IsCommitID(strings.Repeat("a1", 20)) || !IsCommitID(strings.Repeat("0f", 32)) {
		t.Error("full SHA-1 and SHA-256 ids are commits")
	}
	for _, bad := range []string{"", "main", strings.Repeat("a", 39), strings.Repeat("A1", 20), strings.Repeat("g", 40)} {
		if IsCommitID(bad) {
			t.Errorf("IsCommitID(%q) = true", bad)
		}
	}
	if got := DefaultBranch("code-review", "thread-7"); got != "nerve/code-review/thread-7" || CheckBranch(got) != nil {
		t.Errorf("DefaultBranch = %q", got)
	}
}

func TestCloudSourceDropsLocalRepo(t *testing.T) {
	d := mustParse(t, twoRoles+"workspace: {repo: ., base: main}\n")
	src, err := d.CloudSource()
	if err != nil {
		t.Fatal(err)
	}
	cd, err := ParseSource("cloud", src)
	if err != nil {
		t.Fatalf("the pushed definition must parse as cloud: %v\n%s", err, src)
	}
	if cd.Workspace == nil || cd.Workspace.Repo != "" || cd.Workspace.Base != "main" {
		t.Fatalf("cloud workspace %+v, want the base kept and the local repo dropped", cd.Workspace)
	}
	d = mustParse(t, twoRoles+"workspace: {repo: 'https://git.example.com/app.git'}\n")
	src, _ = d.CloudSource()
	if cd, err := ParseSource("cloud", src); err != nil || cd.Workspace.Repo != "https://git.example.com/app.git" {
		t.Fatalf("a shared repo is kept: %v %+v", err, cd)
	}
}

func TestMessageEncodingUnchangedWithoutWorkspace(t *testing.T) {
	raw, err := json.Marshal(Message{Step: 1, Role: "a", Content: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "commit") || strings.Contains(string(raw), "changes") {
		t.Fatalf("a message without a commit is stored as before: %s", raw)
	}
	raw, _ = json.Marshal(Message{Step: 1, Commit: "c", Changes: &Changes{}})
	if !strings.Contains(string(raw), `"commit":"c","changes":{"files":0,"insertions":0,"deletions":0}`) {
		t.Fatalf("commit and changes: %s", raw)
	}
	raw, _ = json.Marshal(Thread{ID: "thread-1"})
	if !strings.Contains(string(raw), `"workspace":null`) {
		t.Fatalf("a thread shows workspace: null when it has none: %s", raw)
	}
}

// A default branch the shared remote has is not taken again: the next
// free name is.
func TestFreeBranch(t *testing.T) {
	for _, tc := range []struct {
		taken []string
		want  string
	}{
		{nil, "nerve/w/thread-3"},
		{[]string{"nerve/w/thread-30", "nerve/w/thread-3-2"}, "nerve/w/thread-3"},
		{[]string{"nerve/w/thread-3"}, "nerve/w/thread-3-2"},
		{[]string{"nerve/w/thread-3", "nerve/w/thread-3-2", "nerve/w/thread-3-3"}, "nerve/w/thread-3-4"},
	} {
		if got := FreeBranch("nerve/w/thread-3", tc.taken); got != tc.want {
			t.Errorf("FreeBranch(%v) = %q; want %q", tc.taken, got, tc.want)
		}
	}
}
