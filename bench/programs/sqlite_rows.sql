-- 200,000 rows inserted, indexed, queried and a third of them deleted, in memory.
create table t(a integer primary key, b text, c blob);
with recursive c(x) as (select 1 union all select x+1 from c where x<200000) insert into t select x, hex(randomblob(20)), randomblob(100) from c;
create index ib on t(b);
select count(*), sum(length(c)) from t where b like 'A%';
delete from t where a % 3 = 0;
select count(*) from t;
