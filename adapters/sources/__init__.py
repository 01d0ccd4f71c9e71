"""Where sources' files come from: git repositories (the `git` command) and the web."""
