"""Chapter 7 (GPU kernels, beyond the lecture) exercises: merging two online-softmax states,
counting the bytes that naive attention moves, a first Triton kernel of the reader's own (a
row sum), and the inner loop of the FlashAttention forward pass in a given skeleton.

The answer of each kernel exercise is a ``@triton.jit`` function: its ``launch`` runs it through
Triton's interpreter on the CPU when it was defined under ``TRITON_INTERPRET=1``, natively on
a CUDA GPU when it was compiled, and otherwise says in Chinese why it cannot run and how to
fix that (install triton; set the variable before triton is imported, then restart).
"""

from __future__ import annotations

import contextlib
import importlib.util
import random
from collections.abc import Callable, Iterator
from typing import Any

import torch

from lecturekit.exercises import CannotRun, Case, Exercise, register
from lecturekit.exercises.specs import Array, Integer, Items
from lecturekit.kernels._utils import interpreter_enabled

# --------------------------------------------------------------------------------------
# kernels.merge_softmax_state
# --------------------------------------------------------------------------------------


def reference_merge_softmax_state(
    m1: torch.Tensor, l1: torch.Tensor, m2: torch.Tensor, l2: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge two online-softmax states ``(m, l)`` of disjoint parts of a row.

    ``m`` is a part's maximum, ``l = sum(exp(x - m))`` over that part. Returns the state of
    the union: ``m = max(m1, m2)``, ``l = l1 exp(m1 - m) + l2 exp(m2 - m)``. Parts with no
    entries (``m = -inf``, ``l = 0``) must not produce NaN.
    """
    m = torch.maximum(m1, m2)
    m_safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)  # -inf - -inf is NaN
    return m, l1 * torch.exp(m1 - m_safe) + l2 * torch.exp(m2 - m_safe)


def _state(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(m, l) of each row of ``x`` (rows of -inf are empty parts: m = -inf, l = 0)."""
    m = x.max(dim=-1).values
    m_safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    return m, torch.exp(x - m_safe[..., None]).sum(dim=-1)


def _merge_cases() -> list[Case]:
    g = torch.Generator().manual_seed(7)
    a = torch.randn(4, 5, generator=g, dtype=torch.float64) * 3
    b = torch.randn(4, 3, generator=g, dtype=torch.float64) * 3 + 2
    empty = torch.full((2, 3), float("-inf"), dtype=torch.float64)
    some = torch.tensor([[1.0, -2.0, 0.5], [float("-inf"), 3.0, 2.0]], dtype=torch.float64)
    same = torch.tensor([[2.0, 0.0], [-1.0, -1.0]], dtype=torch.float64)
    cases = [
        Case(args=(*_state(a), *_state(b)), label="四行，两段各 5 和 3 个数"),
        Case(args=(*_state(some), *_state(empty)), label="第二段全被遮住 (m=-inf, l=0)"),
        Case(args=(*_state(empty), *_state(some)), label="第一段全被遮住"),
        Case(args=(*_state(empty), *_state(empty)), label="两段都被遮住"),
        Case(args=(*_state(same), *_state(same.flip(-1))), label="两段的最大值相等"),
    ]
    rng = random.Random(17)
    for _ in range(3):
        rows = tuple(rng.randint(1, 4) for _ in range(rng.randint(0, 2)))
        x = torch.randn(*rows, 2, rng.randint(1, 6), generator=g, dtype=torch.float64)
        x = x * rng.choice([1.0, 10.0])
        x[..., 0, :][torch.rand(rows, generator=g) < 0.3] = float("-inf")  # some empty parts
        cases.append(
            Case(
                args=(*_state(x[..., 0, :]), *_state(x[..., 1, :])), label=f"随机输入，形状 {rows}"
            )
        )
    return cases


register(
    Exercise(
        id="kernels.merge_softmax_state",
        chapter=7,
        title="合并两段的在线 softmax 状态",
        prompt=(
            "一行分数被切成两段。每段有状态 (m, l)：m 是这一段的最大值，l = Σ exp(x - m)。"
            "写 merge_softmax_state(m1, l1, m2, l2)，返回整行的 (m, l)。\n"
            "四个参数是形状相同的 float64 张量，每个元素对应一行（形状可以是 ()、(R,) 或更多维）。"
            "被完全遮住的段 m = -inf、l = 0：一段被遮住时，结果就是另一段的状态；"
            "两段都被遮住时结果是 (-inf, 0)，不能出现 NaN。"
        ),
        hint=(
            "两段的 l 是以各自的最大值为基准算的，不能直接相加：先把它们换算到同一个基准"
            "（整行的最大值）上。-inf 减 -inf 是 NaN，两段都被遮住的情况要单独处理。"
        ),
        explanation=(
            "m = torch.maximum(m1, m2)；m_safe = torch.where(m == -inf, 0, m)；"
            "l = l1 · exp(m1 - m_safe) + l2 · exp(m2 - m_safe)。被遮住的段 exp(-inf) = 0，贡献为 0。"
        ),
        kind="function",
        returns=Items(
            (Array("float64", "与 m1 相同"), Array("float64", "与 m1 相同")), names=("m", "l")
        ),
        cases=_merge_cases,
        reference=reference_merge_softmax_state,
    )
)

# --------------------------------------------------------------------------------------
# kernels.naive_attention_bytes
# --------------------------------------------------------------------------------------


def reference_naive_attention_bytes(n: int, d: int, bytes_per_element: int) -> int:
    """DRAM bytes of one head of unfused attention with ``Nq = Nk = n``, head dim ``d``.

    Read Q, K (``2 n d``), write S, read S, write P (``3 n^2``), read P and V (``n^2 + n d``),
    write O (``n d``): ``4 n^2 + 4 n d`` elements.
    """
    return (4 * n * n + 4 * n * d) * bytes_per_element


def _bytes_cases() -> list[Case]:
    settings = [(1024, 64, 2), (17, 40, 4), (16384, 128, 2), (1, 1, 1)]
    rng = random.Random(18)
    drawn = [
        (rng.randint(1, 5000), rng.randint(1, 256), rng.choice([1, 2, 4, 8])) for _ in range(4)
    ]
    return [
        Case(args=s, label=f"{prefix}n={s[0]}, d={s[1]}, 每个元素 {s[2]} 字节")
        for prefix, group in (("", settings), ("随机：", drawn))
        for s in group
    ]


register(
    Exercise(
        id="kernels.naive_attention_bytes",
        chapter=7,
        title="数一数朴素注意力搬运的字节",
        prompt=(
            "不融合的注意力（一个头，查询和键的个数都是 n，头维度 d_k，也就是参数 d）："
            "读 Q、K，算出分数 S 写回显存；"
            "softmax 读 S、写 P；再读 P 和 V，写出 O。写 naive_attention_bytes(n, d, bytes_per_element)，"
            "返回这些步骤一共读写的字节数。n、d、bytes_per_element 都是正整数。"
        ),
        hint=(
            "把每一步读写的矩阵列出来：有的是 n×n，有的是 n×d_k；一个矩阵每被读或写一次，"
            "就搬运它的全部元素。最后别忘了一个元素占几个字节。"
        ),
        explanation=(
            "n×n 的矩阵被读写 4 次（写 S、读 S、写 P、读 P），n×d_k 的矩阵 4 次（读 Q、K、V，写 O）："
            "(4n² + 4n·d_k) · bytes_per_element。"
        ),
        kind="function",
        returns=Integer(),
        cases=_bytes_cases,
        reference=reference_naive_attention_bytes,
    )
)

# --------------------------------------------------------------------------------------
# kernels.row_sum_kernel: the reader's own Triton kernel
# --------------------------------------------------------------------------------------

_RESTART = (
    "在定义内核之前（最好在笔记本的第一个代码单元格里）运行 "
    "import os; os.environ['TRITON_INTERPRET'] = '1'，或者 "
    "lecturekit.kernels.interpret_without_gpu()，再重新运行定义内核的单元格。"
    "Triton 在定义内核 (@triton.jit) 的那一刻决定编译还是解释；最稳妥的做法是"
    "重启笔记本的 Python 进程（Jupyter 菜单里的 Restart Kernel）后从头运行。"
)


def kernel_device(kernel: Any) -> torch.device:
    """Where a student's ``@triton.jit`` kernel runs: the CPU if it was defined under Triton's
    interpreter, CUDA if it was compiled for a GPU and there is one; else ``CannotRun`` with
    the reason and the fix, in Chinese."""
    if importlib.util.find_spec("triton") is None:
        raise CannotRun(
            "这里没有安装 triton，内核无法运行。安装 lecturekit 的 gpu 附加包"
            "（pip install 'lecturekit[gpu]'，Linux），或者在 Colab 里运行本章。"
        )
    kind = type(kernel).__name__
    if kind == "InterpretedFunction":
        return torch.device("cpu")
    if kind != "JITFunction":
        raise CannotRun(
            f"这道题要的是用 @triton.jit 装饰的内核本身，你传入的是{_kind(kernel)}。"
            "请把 @triton.jit 写在 def 的上一行，并把函数名（不加括号）传给 check。"
        )
    if torch.cuda.is_available():
        return torch.device("cuda")
    now = (
        "（TRITON_INTERPRET 现在已经是 1，但内核是在设置它之前定义的）"
        if interpreter_enabled()
        else ""
    )
    raise CannotRun(
        f"这台机器没有 CUDA GPU，而你的内核是为 GPU 编译的{now}，所以无法运行。"
        f"要在 CPU 上用 Triton 的解释器运行它：{_RESTART}"
    )


def _kind(answer: Any) -> str:
    if callable(answer):
        return "一个普通的 Python 函数（没有 @triton.jit）"
    return f" {type(answer).__name__}"


@contextlib.contextmanager
def _masked_lanes_poisoned() -> Iterator[None]:
    """While the block runs, a masked float ``tl.load`` without ``other=`` reads NaN in its
    masked lanes under Triton's interpreter, instead of the interpreter's 0.

    On a GPU those lanes hold whatever the registers held, so a kernel that forgets
    ``other=0.0`` would pass in the interpreter and sum garbage on a GPU; with NaN there it
    fails the check here too. Patches the interpreter's builder (a private API of triton) and
    restores it; where that API is missing, the block runs unpatched.
    """
    try:
        import numpy as np
        from triton.runtime import interpreter

        builder = interpreter.interpreter_builder
        original = builder.create_masked_load
        np_dtype = interpreter._get_np_dtype
    except (ImportError, AttributeError):
        yield
        return
    import triton.language as tl

    def poisoned(ptrs: Any, mask: Any, other: Any, *args: Any, **kwargs: Any) -> Any:
        dtype = ptrs.get_element_ty()
        if other is None and dtype in (tl.float16, tl.float32, tl.float64):
            nan = np.full_like(ptrs.data, np.nan, dtype=np_dtype(dtype))
            other = interpreter.TensorHandle(nan, dtype)
        return original(ptrs, mask, other, *args, **kwargs)

    patched_before = "create_masked_load" in vars(builder)
    builder.create_masked_load = poisoned
    try:
        yield
    finally:
        if patched_before:
            builder.create_masked_load = original
        else:
            del builder.create_masked_load  # the class's method again


def _launch_row_sum(kernel: Any) -> Callable[[torch.Tensor, int], torch.Tensor]:
    """The function ``check`` calls on each case: it launches ``kernel`` on ``x (R, C)``."""
    device = kernel_device(kernel)

    def row_sum(x: torch.Tensor, block: int) -> torch.Tensor:
        n_rows, n_cols = x.shape
        # rows stride_row = C + block apart, the gaps filled with NaN: a read past the end of
        # a row (a missing mask, a wrong stride) gives NaN instead of a plausible number
        stride_row = n_cols + block
        buffer = torch.full((n_rows, stride_row), float("nan"), device=device)
        buffer[:, :n_cols] = x.to(device)
        # +inf marks "never written" (the test rows have finite sums; a NaN read gives NaN)
        out = torch.full((n_rows,), float("inf"), device=device)
        # masked lanes read NaN unless the kernel says what they read (other=0.0)
        poison = _masked_lanes_poisoned() if device.type == "cpu" else contextlib.nullcontext()
        with poison:
            kernel[(n_rows,)](buffer, out, n_cols, stride_row, BLOCK=block)
        if n_rows and bool(out.isposinf().all()):  # nothing written: an empty skeleton
            raise NotImplementedError(
                "内核没有往 OUT 里写任何结果（还没写完，或者忘了 tl.store）。"
            )
        return out.cpu()

    return row_sum


def reference_row_sum(x: torch.Tensor, block: int) -> torch.Tensor:
    """What the kernel must compute, ``x (R, C)`` -> ``(R,)``: each row's sum (the block size
    changes how, not what)."""
    return x.double().sum(dim=-1).float()


def _row_sum_cases() -> list[Case]:
    g = torch.Generator().manual_seed(71)

    def quarters(rows: int, cols: int) -> torch.Tensor:  # exact sums in float32, any order
        return torch.randint(-12, 13, (rows, cols), generator=g).float() / 4

    cases = [
        Case(args=(quarters(3, 16), 16), label="3 行，C = 16 恰好是一块"),
        Case(args=(quarters(2, 5), 16), label="C = 5 比一块短"),
        Case(args=(quarters(4, 32), 8), label="C = 32 是 4 块"),
        Case(args=(quarters(3, 19), 8), label="C = 19 不是块大小 8 的倍数"),
        Case(args=(quarters(1, 1), 4), label="1 行 1 列"),
        Case(args=(torch.randn(2, 13, generator=g), 4), label="非整数的数，C = 13，块大小 4"),
    ]
    rng = random.Random(72)
    for _ in range(3):
        rows, cols, block = rng.randint(1, 4), rng.randint(1, 40), rng.choice([4, 8, 16])
        cases.append(
            Case(
                args=(quarters(rows, cols), block),
                label=f"随机：{rows} 行 {cols} 列，块大小 {block}",
            )
        )
    return cases


register(
    Exercise(
        id="kernels.row_sum_kernel",
        chapter=7,
        title="写一个 Triton 内核：逐行求和",
        prompt=(
            "它是一个用 @triton.jit 装饰的 Triton 内核 (kernel)，签名是\n"
            "    row_sum_kernel(X, OUT, n_cols, stride_row, BLOCK: tl.constexpr)\n"
            "X 指向一个 float32 矩阵，有若干行、每行 n_cols 个有效的数；相邻两行的起点相隔 "
            "stride_row 个元素（stride_row 比 n_cols 大，两行之间的空隙不是有效数据）。"
            "检查器按每行一个程序实例 (program instance) 启动它：row_sum_kernel[(行数,)](...)。"
            "第 row 个程序实例把第 row 行 n_cols 个数的和写到 OUT[row] (float32)。\n"
            "一次只能读 BLOCK 个数（BLOCK 是 2 的幂，测试里取 4、8、16）：n_cols 可以比 BLOCK 小，"
            "也可以是它的好几倍，而且不一定是它的倍数。\n"
            "没有 GPU 时，内核要在 Triton 的解释器里运行：在定义它之前设置 "
            "os.environ['TRITON_INTERPRET'] = '1'（本节开头的准备单元格就这样做）；"
            "有 GPU 而没有设置它时，检查器在 GPU 上运行你的内核。"
        ),
        hint=(
            "先想一个程序实例负责什么：一整行。它怎样找到自己这一行的起点？行与行之间隔的是"
            "步长 (stride)，不是 n_cols。一行要分几次读完，每次读的一块里，哪些位置已经越过了"
            "这一行的末尾？越界的位置不能读进来，也不能让它们影响和。"
        ),
        explanation=(
            "row = tl.program_id(0)；从 X + row * stride_row 开始，用 for 循环每次取 "
            "cols = start + tl.arange(0, BLOCK)，tl.load 时加 mask=cols < n_cols、other=0.0，"
            "累加到一个 (BLOCK,) 的 float32 累加器里；最后 tl.store(OUT + row, tl.sum(acc, axis=0))。"
        ),
        kind="function",
        returns=Array("float32", "(行数,)"),
        cases=_row_sum_cases,
        reference=reference_row_sum,
        launch=_launch_row_sum,
        model_answer="lecturekit.exercises.triton_answers.row_sum_kernel",
    )
)

# --------------------------------------------------------------------------------------
# kernels.attention_kernel: the inner loop of the FlashAttention forward pass
# --------------------------------------------------------------------------------------

_ATTENTION_BLOCK_M, _ATTENTION_D = 16, 16  # the skeleton's query block and head dimension


def _launch_attention(kernel: Any) -> Callable[..., torch.Tensor]:
    """The function ``check`` calls on each case: it launches ``kernel`` on ``q (Nq, D)``,
    ``k``, ``v`` ``(Nk, D)`` with ``BLOCK_N`` keys per step."""
    device = kernel_device(kernel)

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_n: int) -> torch.Tensor:
        n_q, n_k = q.shape[0], k.shape[0]
        # K and V rows past Nk (up to a whole block more) hold NaN: a key read without its
        # mask gives NaN, not a plausible number
        padded = n_k + block_n
        k_buf = torch.full((padded, _ATTENTION_D), float("nan"), device=device)
        v_buf = torch.full((padded, _ATTENTION_D), float("nan"), device=device)
        k_buf[:n_k], v_buf[:n_k] = k.to(device), v.to(device)
        out = torch.full((n_q, _ATTENTION_D), float("inf"), device=device)
        grid = (-(-n_q // _ATTENTION_BLOCK_M),)
        poison = _masked_lanes_poisoned() if device.type == "cpu" else contextlib.nullcontext()
        with poison:
            kernel[grid](
                q.to(device).contiguous(), k_buf, v_buf, out, n_q, n_k,
                BLOCK_M=_ATTENTION_BLOCK_M, BLOCK_N=block_n, D=_ATTENTION_D,
            )  # fmt: skip
        if n_q and bool((out == 0).all()):  # the skeleton's loop left acc at 0
            raise NotImplementedError("输出全是 0：循环体还空着，或者 acc 从没加上 p 与 V 的乘积。")
        return out.cpu()

    return attention


def reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_n: int
) -> torch.Tensor:
    """What the kernel must compute: ``softmax(q k^T) v``, ``(Nq, D)``, in float64 then
    float32 (the block size changes how, not what)."""
    return (torch.softmax(q.double() @ k.double().T, dim=-1) @ v.double()).float()


def _attention_cases() -> list[Case]:
    g = torch.Generator().manual_seed(73)

    def qkv(n_q: int, n_k: int, spread: float = 1.0) -> tuple[torch.Tensor, ...]:
        return tuple(
            torch.randn(n, _ATTENTION_D, generator=g) * s
            for n, s in ((n_q, spread), (n_k, 1.0), (n_k, 1.0))
        )

    settings = [
        (16, 16, 16, 1.0, "Nq = Nk = 16，一块"),
        (16, 64, 16, 1.0, "Nk = 64 是 4 块"),
        (16, 37, 16, 1.0, "Nk = 37 不是块大小 16 的倍数"),
        (20, 5, 8, 1.0, "Nk = 5 比一块短，Nq = 20 跨两个查询块"),
        (16, 40, 8, 4.0, "分数大（查询乘 4），最大值在后面的块里刷新"),
        (7, 1, 16, 1.0, "只有 1 个键"),
    ]
    cases = [
        Case(args=(*qkv(n_q, n_k, spread), block_n), label=label)
        for n_q, n_k, block_n, spread, label in settings
    ]
    rng = random.Random(74)
    for _ in range(2):
        n_q, n_k, block_n = rng.randint(1, 40), rng.randint(1, 70), rng.choice([8, 16])
        cases.append(
            Case(
                args=(*qkv(n_q, n_k), block_n),
                label=f"随机：Nq = {n_q}，Nk = {n_k}，块大小 {block_n}",
            )
        )
    return cases


register(
    Exercise(
        id="kernels.attention_kernel",
        chapter=7,
        title="写 FlashAttention 前向的内层循环",
        prompt=(
            "补完下面骨架里的循环体，签名是\n"
            "    attention_kernel(Q, K, V, OUT, n_q, n_k, BLOCK_M: tl.constexpr, "
            "BLOCK_N: tl.constexpr, D: tl.constexpr)\n"
            "Q 是 (n_q, D)、K 和 V 是 (n_k, D) 的 float32 矩阵，按行连续存放；第 pid 个程序实例"
            "负责查询 pid·BLOCK_M 到 (pid+1)·BLOCK_M - 1，把 softmax(Q Kᵀ) V（不带缩放 1/√D）"
            "的这几行写进 OUT。骨架已经读好了查询块 q (BLOCK_M, D)，"
            "准备好 m_i、l_i、acc，也写好了循环后的 out = acc / l_i 和写回；你要写的是"
            "每一步：读 BLOCK_N 个键和值，算分数，按在线 softmax 更新 m_i、l_i、acc。"
            "n_k 不一定是 BLOCK_N 的倍数（测试里 BLOCK_N 取 8、16，D = 16，BLOCK_M = 16）。"
            '两次矩阵乘可以用 tl.dot(a, b, input_precision="ieee")（fp32 的完整精度；'
            "GPU 上不写时默认 TF32，误差超出检查的容差）。\n"
            "没有 GPU 时，内核要在 Triton 的解释器里运行：在定义它之前设置 "
            "os.environ['TRITON_INTERPRET'] = '1'（本节开头的准备单元格就这样做）。"
        ),
        hint=(
            "对照正文的递推：先求新的行最大值，再算缩放因子（旧最大值减新最大值的指数）"
            "和这一块的权重；指数和与累加器都要先乘缩放因子，再加上这一块的贡献；"
            "最后别忘了更新行最大值。越过 n_k 的键：读的时候要挡住，被挡住的位置读作 0；"
            "算出的分数还要设成负无穷，否则它们会分走权重。"
        ),
        explanation=(
            "offs_n = start_n + tl.arange(0, BLOCK_N)；按 offs_n < n_k 带 other=0.0 读 K、V 的块；"
            "s = tl.dot(q, tl.trans(k))，越界的列设为 -inf；m_new = max(m_i, 行最大值)，"
            "alpha = exp(m_i - m_new)，p = exp(s - m_new)，l_i = l_i·alpha + p 的行和，"
            "acc = acc·alpha + tl.dot(p, v)，m_i = m_new。"
        ),
        kind="function",
        returns=Array("float32", "(n_q, D)"),
        cases=_attention_cases,
        reference=reference_attention,
        launch=_launch_attention,
        model_answer="lecturekit.exercises.triton_answers.attention_kernel",
    )
)
