#!/usr/bin/env bash
# Real programs under hakmem (through bin/hakmem): each run's exit status and output must be
# identical to the same run without it, and hakmem must really have been loaded (its stats
# line, requested with HAKMEM_STATS=1, appears on stderr). Outputs are chosen to be
# deterministic: git's pack sizes, for one, depend on its threads' timing, so only object
# counts are compared (and git fsck checks every object).
set -u
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
export GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' GIT_COMMITTER_DATE='2026-01-01T00:00:00Z'
export GIT_CONFIG_NOSYSTEM=1 HOME=$work

# compare NAME SCRIPT: runs SCRIPT (bash) in a fresh directory with and without hakmem.
compare() {
    local name=$1 script=$2
    mkdir -p "$work/plain" "$work/hak"
    (cd "$work/plain" && bash -c "$script") >"$work/plain.out" 2>/dev/null
    local rc_plain=$?
    (cd "$work/hak" && HAKMEM_STATS=1 "$root/bin/hakmem" bash -c "$script") \
        >"$work/hak.out" 2>"$work/hak.err"
    local rc_hak=$?
    if ! grep -q '^hakmem stats (pid [0-9]*):' "$work/hak.err"; then
        echo "FAIL: program $name (hakmem was not loaded)"
    elif [ $rc_plain -ne $rc_hak ]; then
        echo "FAIL: program $name (status $rc_hak under hakmem, $rc_plain without)"
        grep -m3 '^hakmem:' "$work/hak.err"
    elif ! cmp -s "$work/plain.out" "$work/hak.out"; then
        echo "FAIL: program $name (output differs)"
        diff "$work/plain.out" "$work/hak.out" | head -5
    elif [ $rc_plain -ne 0 ]; then
        echo "FAIL: program $name (exits $rc_plain even without hakmem)"
    else
        echo "PASS: program $name"
    fi
    rm -rf "$work/plain" "$work/hak"
}

compare python3 'python3 - <<PY
import random
random.seed(7)
total = 0
for round in range(6):
    d = {i: str(i) * (i % 50) for i in range(150000)}
    l = [s.upper() + "x" for s in d.values()]
    t = {tuple(range(i % 20)): i for i in range(20000)}
    s = "".join(random.choice("abcdef") for _ in range(200000))
    total += len(l) + sum(map(len, l)) + len(t) + s.count("abc")
    del d, l, t, s
big = [bytearray(n) for n in range(0, 3000000, 49999)]
print(total, sum(map(len, big)))
PY'

compare git 'git init -q repo && cd repo &&
for d in $(seq 1 20); do mkdir -p dir$d; for f in $(seq 1 15); do
  seq 1 $((d * f * 3)) | sed "s/^/line $d $f /" > dir$d/file$f.txt; done; done &&
git add -A && git commit -qm "first" &&
for f in dir1/*.txt dir7/*.txt; do echo change >> $f; done &&
git commit -qam "second" && git log --stat | md5sum && git gc -q &&
git count-objects -v | grep -E "^(count|in-pack|packs):" && git fsck --full --no-progress &&
git log --oneline | wc -l && git show HEAD~1:dir3/file4.txt | tail -1'

compare sqlite3 'sqlite3 db.sqlite <<SQL
create table t(id integer primary key, name text, v real);
with recursive c(x) as (select 1 union all select x + 1 from c where x < 100000)
insert into t select x, printf("name-%d-%s", x, substr("abcdefghij", 1 + x % 10)), x * 0.5 from c;
create index t_name on t(name);
select count(*), sum(v), min(name), max(name) from t;
select name from t where id % 9973 = 0 order by name;
select substr(name, 1, 7) as k, count(*) from t group by k order by k limit 5;
delete from t where id % 2 = 0;
vacuum;
select count(*) from t;
SQL'

cat > "$work/prog.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct node { struct node *next; char name[24]; };
static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
int main(void) {
    struct node *head = NULL;
    for (int i = 0; i < 1000; i++) {
        struct node *n = malloc(sizeof *n);
        snprintf(n->name, sizeof n->name, "n%07d", (i * 7919) % 1000);
        n->next = head; head = n;
    }
    char *names[1000]; int k = 0;
    for (struct node *n = head; n; n = n->next) names[k++] = n->name;
    qsort(names, k, sizeof names[0], cmp);
    printf("%s %s %d\n", names[0], names[k - 1], k);
    return 0;
}
C
compare gcc "gcc -O2 -Wall -o prog '$work/prog.c' && ./prog && gcc -O2 -c '$work/prog.c' -o p.o && md5sum < p.o"

compare c++ "'$root/build/tests/cxx_program'"
