package workspace

import "testing"

// Two spellings of one repository's URL have one id; another repository's
// differs.
func TestRepoID(t *testing.T) {
	same := [][]string{
		{"https://github.com/org/svc.git", "https://user:tok@github.com/org/svc", "ssh://git@github.com/org/svc.git", "git@github.com:org/svc.git", "github.com:org/svc/"},
		{"/srv/git/svc.git", "file:///srv/git/svc.git", "/srv/git/./svc.git/"},
		{"/srv/git/work", "/srv/git/work/.git"},
	}
	for _, group := range same {
		for _, u := range group[1:] {
			if a, b := repoID(group[0], "/"), repoID(u, "/"); a != b {
				t.Errorf("repoID(%q) = %q, repoID(%q) = %q; want one", group[0], a, u, b)
			}
		}
	}
	for _, pair := range [][2]string{
		{"https://github.com/org/svc.git", "https://github.com/org/other.git"},
		{"https://github.com/org/svc.git", "https://gitlab.com/org/svc.git"},
		{"/srv/git/svc.git", "/srv/git/other.git"},
		{"git@github.com:org/svc.git", "/org/svc.git"},
	} {
		if repoID(pair[0], "/") == repoID(pair[1], "/") {
			t.Errorf("repoID(%q) = repoID(%q)", pair[0], pair[1])
		}
	}
}
