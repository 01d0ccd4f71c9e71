"""Knowledge that keeps itself current: configured sources (a git repository, a folder, a web
site) synced into a knowledge base, each sync indexing only what changed since the last one."""
