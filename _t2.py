import numpy as np
import kdsl as kd

@kd.kernel
def k1(a: kd.Array[kd.f32], b: kd.Array[kd.f32, 2], out: kd.Array[kd.f32]):
    t = 0.0
    for v in a * 2.0:
        t += v
    for i, c in enumerate(kd.cumsum(a)):
        t += i * c
    for j in kd.prange(b.shape[0]):
        s = 0.0
        for x in b[j] * b[j]:
            s += x
        for k in kd.argsort(b[j]):
            s += k
        out[j] = s
    return t
a = np.random.rand(10).astype(np.float32)
b = np.random.rand(6, 5).astype(np.float32)
o1 = np.zeros(6, np.float32); o2 = np.zeros(6, np.float32)
print(k1(a, b, o1), k1.python(a, b, o2)); print(o1 - o2)

@kd.func
def f(x: kd.f32) -> kd.f32:
    return x
@kd.kernel
def bad(a: kd.Array[kd.f32]):
    for v in f(a[0]):
        pass
try: bad(a)
except kd.CompileError as e: print(e)
@kd.kernel
def bad2(a: kd.Array[kd.f32]):
    for v in 5:
        pass
try: bad2(a)
except kd.CompileError as e: print(e)
