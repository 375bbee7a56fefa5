# A dict of 300,000 entries churned: half of them deleted and as many added, 3 times.
import random
random.seed(1)
d = {}
for i in range(300000):
    d[str(i)] = [i, str(i) * 3, {"k": i}]
for r in range(3):
    ks = list(d.keys()); random.shuffle(ks)
    for k in ks[:150000]:
        del d[k]
    for i in range(150000):
        d[str(random.random())] = (i, [i] * 5)
print(len(d))
