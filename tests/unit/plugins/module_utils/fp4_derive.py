# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The FP4 kernel table (_fp4_kernels) rebuilt from the sources themselves, for test_fp4_kernels.

SGLang's side is read from a release's ``sglang/srt`` (the installed 0.5.23, the unpacked 0.5.16) with ``ast``;
FlashInfer's from the verbatim files of the pinned flashinfer-python wheels in tests/fixtures/flashinfer/ (MANIFEST.md
there). Where a fact is the outcome of a small function (which arch FlashInfer targets for SM120 under a given CUDA,
what ``auto`` becomes on SM120), that function's own code is taken from the source with ``ast`` (imports stripped)
and run on stubs of an SM120 machine: the answer is the source's, not a reading of it.
"""

from __future__ import annotations

import ast
import enum
import functools
import gzip
import pathlib
import re
import types

ROOT = pathlib.Path(__file__).resolve().parents[4]
FLASHINFER_FIXTURES = ROOT / "tests" / "fixtures" / "flashinfer"
CUDA_VERSIONS = ("12.8", "12.9", "13.0")  # nvcc first targets sm_120 in 12.8
CAPABILITY = (12, 0)


def _version(text):
    return tuple(int(p) for p in str(text).split("."))


# ----------------------------------------------------------------------------------------------
# reading and running source


@functools.lru_cache(maxsize=None)
def _parse_path(path):
    data = pathlib.Path(path).read_bytes()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    return ast.parse(data.decode("utf-8"), filename=path)


def flashinfer_tree(version, rel):
    return _parse_path(str(FLASHINFER_FIXTURES / version / (rel + ".gz")))


def flashinfer_text(version, rel):
    return gzip.decompress((FLASHINFER_FIXTURES / version / (rel + ".gz")).read_bytes())


def sglang_tree(srt, rel):
    return _parse_path(str(srt / rel))


def find_def(tree, name, kind=(ast.FunctionDef, ast.ClassDef)):
    found = [n for n in ast.walk(tree) if isinstance(n, kind) and n.name == name]
    assert found, "no %s in the source" % name
    return found[0]


def module_assign(tree, name):
    """The value node of a module-level ``name = ...`` (annotated or not)."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node
    return None


class _NoImports(ast.NodeTransformer):
    def visit_Import(self, node):
        return ast.Pass()

    visit_ImportFrom = visit_Import


def run_def(node, env):
    """Compile a function or class definition from the source, imports and decorators removed, in ``env``."""
    node = _NoImports().visit(ast.fix_missing_locations(ast.parse(ast.unparse(node))).body[0])
    node.decorator_list = []
    namespace = dict(env)
    exec(compile(ast.fix_missing_locations(ast.Module(body=[node], type_ignores=[])), "<source>", "exec"), namespace)
    return namespace[node.name], namespace


def _quiet(*args, **kwargs):
    return None


class Platform:
    """get_platform() of an SM120 GPU: is_sm120 and is_blackwell, nothing else."""

    def __getattr__(self, name):
        if name.startswith("is_"):
            return name in ("is_sm120", "is_blackwell", "is_cuda")
        raise AttributeError(name)


def sm120_env(**extra):
    env = {"get_platform": Platform, "is_cuda": lambda: True, "get_device_capability": lambda *a: CAPABILITY,
           "is_sm100_supported": lambda *a: False, "is_sm120_supported": lambda *a: True, "is_sm110_supported": lambda *a: False,
           "is_blackwell_supported": lambda *a: True, "is_gfx95_supported": lambda *a: False,
           "logger": types.SimpleNamespace(info=_quiet, warning=_quiet, debug=_quiet), "Enum": enum.Enum}
    env.update(extra)
    return env


# ----------------------------------------------------------------------------------------------
# FlashInfer


def flashinfer_sm120_targets(version):
    """(cuda, target or None) for each CUDA version: what FlashInfer's _normalize_cuda_arch makes of SM 12.0."""
    cls = find_def(flashinfer_tree(version, "flashinfer/compilation_context.py"), "CompilationContext", ast.ClassDef)
    out = []
    for cuda in CUDA_VERSIONS:
        fn = run_def(find_def(cls, "_normalize_cuda_arch"), {"is_cuda_version_at_least": lambda v, c=cuda: _version(c) >= _version(v)})[0]
        try:
            major, minor = fn(*CAPABILITY)
            out.append((cuda, "sm_%d%s" % (major, minor)))
        except RuntimeError:
            out.append((cuda, None))
    return tuple(out)


def _capabilities(fn):
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and getattr(dec.func, "id", None) == "supported_compute_capability":
            return tuple(ast.literal_eval(dec.args[0]))
    return None


def mm_fp4_capabilities(version):
    """{mm_fp4 backend: compute capabilities its requirement function accepts} and the line of mm_fp4."""
    tree = flashinfer_tree(version, "flashinfer/gemm/gemm_base.py")
    mm = find_def(tree, "mm_fp4", ast.FunctionDef)
    req = next(d for d in mm.decorator_list if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "backend_requirement")
    table = req.args[0]
    out = {}
    for key, value in zip(table.keys, table.values):
        fn = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == value.id]
        out[key.value] = (_capabilities(fn[0]), "flashinfer/gemm/gemm_base.py:%d" % fn[0].lineno) if fn else (None, None)
    return out, mm.lineno


def _branch_call(fn, env):
    """The gen_/get_ function fn calls on the path its if/elif/else chains take with the values in env."""
    def walk(body):
        for stmt in body:
            if isinstance(stmt, ast.If):
                taken = eval(compile(ast.Expression(stmt.test), "<test>", "eval"), {}, env)
                found = walk(stmt.body if taken else stmt.orelse)
                if found:
                    return found
                continue
            for call in ast.walk(stmt):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id.startswith(("gen_", "get_")):
                    return call.func.id
        return None
    found = walk(fn.body)
    assert found, "no call of %s is reached with %s" % (fn.name, env)
    return found


def _csrc_files(fn):
    """Files under FLASHINFER_CSRC_DIR a generator names (``FLASHINFER_CSRC_DIR / "a/b.cu"`` or ``... / "a" / "b.cu"``),
    in source order: (sources, templates)."""
    inner = {id(n.left) for n in ast.walk(fn) if isinstance(n, ast.BinOp)}
    chains = sorted((n for n in ast.walk(fn) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and id(n) not in inner),
                    key=lambda n: (n.lineno, n.col_offset))
    sources, templates = [], []
    for node in chains:
        parts, cur = [], node
        while isinstance(cur, ast.BinOp) and isinstance(cur.right, ast.Constant):
            parts.insert(0, cur.right.value)
            cur = cur.left
        if ast.unparse(cur).endswith("FLASHINFER_CSRC_DIR") and parts:
            path = "/".join(parts)
            if path.endswith(".jinja"):
                templates.append(path)
            elif path.endswith((".cu", ".cpp")):
                sources.append(path)
    return sources, templates


def jit_module(version, rel, gen_name, **params):
    """A FlashInfer JIT generator, followed through delegation to gen_jit_spec: its module name, the csrc sources and
    templates it compiles, whether it targets SM12x through the compilation context (sm_120a/sm_120f by CUDA) or a
    fixed flag list, whether it generates more sources at build time, and the generator's file:line."""
    tree = flashinfer_tree(version, rel)
    fn = find_def(tree, gen_name, ast.FunctionDef)
    site = "%s:%d" % (rel, fn.lineno)
    sources, templates, arch, generated = [], [], None, False
    while True:
        found, tmpl = _csrc_files(fn)
        sources += found
        templates += tmpl
        for call in ast.walk(fn):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "get_nvcc_flags_list":
                majors = [k.value for k in call.keywords if k.arg == "supported_major_versions"]
                arch = arch or ("context" if majors and 12 in ast.literal_eval(majors[0]) else None)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "generate_gemm_operations":
                generated = True
        spec = [c for c in ast.walk(fn) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "gen_jit_spec"]
        if spec:
            env = dict(params)
            env.update({a.arg: None for a in fn.args.args if a.arg not in env})
            name = eval(compile(ast.Expression(spec[0].args[0]), "<name>", "eval"), {}, env)
            break
        delegate = next(c for c in ast.walk(fn) if isinstance(c, ast.Call) and getattr(c.func, "id", "").startswith("gen_"))
        callee = find_def(tree, delegate.func.id, ast.FunctionDef)
        params = {}
        for param, value in zip(callee.args.args, delegate.args):
            if isinstance(value, ast.Constant):
                params[param.arg] = value.value
            elif isinstance(value, ast.Name) and value.id.endswith("_nvcc_flags"):
                flags = module_assign(flashinfer_tree(version, "flashinfer/jit/core.py"), value.id)
                arch = re.search(r"code=(sm_\w+)", ast.unparse(flags.value)).group(1)
        fn = callee
    templates_generated = bool(templates) or generated
    return {"name": name, "sources": tuple(sources), "templates": tuple(templates), "arch": arch,
            "generated": templates_generated, "generator": site}


def cutlass_fp4_gemm_generator(version):
    """mm_fp4(backend='cutlass') on SM 12.0: gemm_base's get_cutlass_fp4_gemm_module branch, then its gen_ function."""
    tree = flashinfer_tree(version, "flashinfer/gemm/gemm_base.py")
    getter = _branch_call(find_def(tree, "get_cutlass_fp4_gemm_module", ast.FunctionDef), {"sm_major": 12, "sm_minor": 0})
    return _only_gen_call(find_def(tree, getter, ast.FunctionDef))


def _only_gen_call(fn):
    calls = [c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id.startswith("gen_")]
    assert len(calls) == 1, (fn.name, calls)
    return calls[0]


def cutlass_fused_moe_generator(version):
    """cutlass_fused_moe on SM 12.0: fused_moe/core.py's get_cutlass_fused_moe_module branch for backend "120"."""
    tree = flashinfer_tree(version, "flashinfer/fused_moe/core.py")
    return _branch_call(find_def(tree, "get_cutlass_fused_moe_module", ast.FunctionDef), {"backend": "120"})


def fp4_quantize_generator(version, torch_cuda="13.0"):
    """fp4_quantize(backend='cuda') on SM 12.0 under a torch built for ``torch_cuda``: the gen_ function
    get_fp4_quantization_module picks (its "120"/"120f" choice run from the source)."""
    tree = flashinfer_tree(version, "flashinfer/quantization/fp4_quantization.py")
    fn = find_def(tree, "get_fp4_quantization_module", ast.FunctionDef)
    table = next(n.value for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AnnAssign))
                 and getattr(n.targets[0] if isinstance(n, ast.Assign) else n.target, "id", "") == "backend_modules")
    modules = {k.value: v.id for k, v in zip(table.keys, table.values)}
    names = {}
    env = {"torch": types.SimpleNamespace(version=types.SimpleNamespace(cuda=torch_cuda)),
           "version_at_least": lambda a, b: _version(a) >= _version(b)}
    for node in fn.body:
        if isinstance(node, ast.If) and "'120'" in ast.unparse(node.test):
            local = {"backend": "120"}
            body = ast.Module(body=[n for n in node.body if not isinstance(n, (ast.Import, ast.ImportFrom))], type_ignores=[])
            if eval(compile(ast.Expression(node.test), "<t>", "eval"), dict(env), local):
                exec(compile(body, "<b>", "exec"), dict(env), local)
                names["backend"] = local["backend"]
    return modules[names.get("backend", "120")]


def cudnn_fp4_minimums(version):
    """(cudnn frontend (major, minor), cuDNN backend version) _check_cudnn_fp4_availability demands."""
    fn = find_def(flashinfer_tree(version, "flashinfer/gemm/gemm_base.py"), "_check_cudnn_fp4_availability", ast.FunctionDef)
    frontend = backend = None
    for cmp in (n for n in ast.walk(fn) if isinstance(n, ast.Compare)):
        right = cmp.comparators[0]
        if isinstance(right, ast.Tuple):
            frontend = ast.literal_eval(right)
        elif isinstance(right, ast.Constant) and isinstance(right.value, int):
            backend = right.value
    return frontend, backend, fn.lineno


def class_capabilities(version, rel, cls_name):
    """The compute capabilities a class's methods are decorated with (supported_compute_capability), merged."""
    cls = find_def(flashinfer_tree(version, rel), cls_name, ast.ClassDef)
    caps = {c for n in cls.body if isinstance(n, ast.FunctionDef) for c in (_capabilities(n) or ())}
    return tuple(sorted(caps)), cls.lineno


def flashinfer_defines(version, rel, name):
    tree = flashinfer_tree(version, rel)
    return any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name for n in tree.body)


def cache_layout(version):
    """The expressions FlashInfer builds its JIT cache and prebuilt (AOT) paths from."""
    env = flashinfer_tree(version, "flashinfer/jit/env.py")
    core = flashinfer_tree(version, "flashinfer/jit/core.py")
    ws = find_def(env, "_get_workspace_dir_name", ast.FunctionDef)
    out = {
        "base": ast.unparse(module_assign(env, "FLASHINFER_BASE_DIR").value),
        "cache": ast.unparse(module_assign(env, "FLASHINFER_CACHE_DIR").value),
        "workspace": ast.unparse(ws.body[-1].value),
        "jit": ast.unparse(module_assign(env, "FLASHINFER_JIT_DIR").value),
        "library": ast.unparse(find_def(core, "jit_library_path", ast.FunctionDef).body[-1].value),
        "jit_cache_package": "flashinfer_jit_cache" in ast.unparse(env),
        "aot_default": "_package_root / 'data' / 'aot'" in ast.unparse(env),
    }
    return out


# ----------------------------------------------------------------------------------------------
# SGLang


def requires(srt, release):
    """{distribution: pinned version} of a release's Requires-Dist (no extras markers)."""
    meta = (srt.parents[1] / ("sglang-%s.dist-info" % release) / "METADATA").read_text(encoding="utf-8")
    out = {}
    for m in re.finditer(r"^Requires-Dist: ([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s;]+)\s*$", meta, re.M):
        out[m.group(1).replace("_", "-").lower()] = m.group(2)
    return out


def choices(srt, name):
    """A choices list of server_args (in arg_groups/choices.py since its split out of server_args.py), with its site."""
    for rel in ("arg_groups/choices.py", "server_args.py"):
        path = srt / rel
        if path.exists():
            node = module_assign(sglang_tree(srt, rel), name)
            if node is not None:
                return tuple(ast.literal_eval(node.value)), "sglang/srt/%s:%d" % (rel, node.lineno)
    raise AssertionError("no %s in %s" % (name, srt))


def _line_of(fn, predicate):
    return min(n.lineno for n in ast.walk(fn) if predicate(n))


def gemm_auto(srt):
    """What --fp4-gemm-backend auto becomes on SM 12.0: fp4_utils.initialize_fp4_gemm_config run on SM120 stubs."""
    rel = "layers/quantization/fp4_utils.py"
    node = find_def(sglang_tree(srt, rel), "initialize_fp4_gemm_config", ast.FunctionDef)
    knobs = types.SimpleNamespace(fp4_gemm_runner_backend="auto")
    env = sm120_env(get_exec=lambda: types.SimpleNamespace(kernel=knobs), Fp4GemmRunnerBackend=str)
    fn, namespace = run_def(node, env)
    fn(*([knobs] if node.args.args else []))
    value = namespace["FP4_GEMM_RUNNER_BACKEND"]
    line = _line_of(node, lambda n: isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value == value)
    return value, "sglang/srt/%s:%d" % (rel, line)


def flashinfer_backend_names(srt):
    """{--fp4-gemm-backend choice: the backend string SGLang passes to FlashInfer}, from Fp4GemmRunnerBackend itself."""
    cls_node = find_def(sglang_tree(srt, "layers/quantization/fp4_utils.py"), "Fp4GemmRunnerBackend", ast.ClassDef)
    cls = run_def(cls_node, {"Enum": enum.Enum})[0]
    return {member.value: member.get_flashinfer_backend() for member in cls if member.is_flashinfer()}


def fp4_quantize_use(srt):
    """The backend fp4_utils hands flashinfer.fp4_quantize on SM120, and the line importing it."""
    rel = "layers/quantization/fp4_utils.py"
    tree = sglang_tree(srt, rel)
    imp = next(n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "flashinfer"
               and any(a.name == "fp4_quantize" for a in n.names))
    assign = next(n for n in ast.walk(tree) if isinstance(n, ast.Assign)
                  and getattr(n.targets[0], "id", "") == "_flashinfer_fp4_quantize_backend")
    value = eval(compile(ast.Expression(assign.value), "<v>", "eval"), sm120_env())
    return value, "sglang/srt/%s:%d" % (rel, imp.lineno)


def mm_fp4_call(srt):
    """The line where modelopt_quant calls flashinfer.mm_fp4 (under its import alias) with backend=..."""
    rel = "layers/quantization/modelopt_quant.py"
    tree = sglang_tree(srt, rel)
    alias = next(a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "flashinfer"
                 for a in n.names if a.name == "mm_fp4")
    call = min((n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == alias
                and any(k.arg == "backend" for k in n.keywords)), key=lambda n: n.lineno)
    return "sglang/srt/%s:%d" % (rel, call.lineno)


def marlin_linear(srt):
    """--fp4-gemm-backend marlin: the apply_fp4_marlin_linear call in ModelOptFp4LinearMethod and the kernel module
    marlin_utils_fp4 imports gptq_marlin_gemm from."""
    rel = "layers/quantization/modelopt_quant.py"
    cls = find_def(sglang_tree(srt, rel), "ModelOptFp4LinearMethod", ast.ClassDef)
    line = _line_of(cls, lambda n: isinstance(n, ast.Call) and getattr(n.func, "id", "") == "apply_fp4_marlin_linear")
    utils = sglang_tree(srt, "layers/quantization/marlin_utils_fp4.py")
    module = next(n.module for n in ast.walk(utils) if isinstance(n, ast.ImportFrom)
                  and any(a.name == "gptq_marlin_gemm" for a in n.names))
    return "%s.gptq_marlin_gemm" % module, "sglang/srt/%s:%d" % (rel, line)


def sglang_jit_targets(srt):
    """(cuda, target) for each CUDA version: the arch SGLang's own JIT kernels (tvm-ffi, nvcc at first use) build
    for SM 12.0, from its _cuda_arch_suffix."""
    for rel in ("../kernels/jit/utils/arch.py", "../jit_kernel/utils/arch.py"):
        path = (srt / rel).resolve()
        if path.exists():
            break
    node = find_def(_parse_path(str(path)), "_cuda_arch_suffix", ast.FunctionDef)
    out = []
    for cuda in CUDA_VERSIONS:
        def version(c=cuda):
            return _version(c)
        fn = run_def(node, {"get_cuda_version": version, "_jit_cuda_version": version})[0]
        out.append((cuda, "sm_120" + fn(*CAPABILITY)))
    return tuple(out), "sglang/%s:%d" % (path.relative_to(srt.parent.resolve()).as_posix(), node.lineno)


def moe_auto(srt):
    """What --moe-runner-backend auto becomes for modelopt_fp4 on SM 12.0: arg_groups/overrides.py's
    _moe_runner_backend_quant_constraints run on SM120 stubs."""
    rel = "arg_groups/overrides.py"
    node = find_def(sglang_tree(srt, rel), "_moe_runner_backend_quant_constraints", ast.FunctionDef)
    fn = run_def(node, sm120_env(envs=None))[0]
    view = types.SimpleNamespace(moe_runner_backend="auto", quantization="modelopt_fp4", moe_a2a_backend="none")
    value = fn(view)["moe_runner_backend"]
    line = _line_of(node, lambda n: isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value == value
                    and getattr(n.targets[0], "id", "") == "moe_runner_backend")
    return value, "sglang/srt/%s:%d" % (rel, line)


_BACKEND_RECEIVERS = ("moe_runner_backend", "self._moe_runner_backend", "get_moe_runner_backend()")


def nvfp4_moe_choices(srt, moe_choices):
    """--moe-runner-backend choices ModelOptNvFp4FusedMoEMethod asks about (``<runner backend>.is_<choice>()``), and
    those it refuses (an ``if ....is_<choice>(): raise``), with the raise's line."""
    rel = "layers/quantization/modelopt_quant.py"
    cls = find_def(sglang_tree(srt, rel), "ModelOptNvFp4FusedMoEMethod", ast.ClassDef)
    asked = set()
    for call in ast.walk(cls):
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr.startswith("is_")
                and ast.unparse(call.func.value) in _BACKEND_RECEIVERS and call.func.attr[3:] in moe_choices):
            asked.add(call.func.attr[3:])
    refused = {}
    for node in ast.walk(cls):
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Call) and isinstance(node.test.func, ast.Attribute)
                and node.test.func.attr.startswith("is_") and len(node.body) == 1 and isinstance(node.body[0], ast.Raise)):
            refused[node.test.func.attr[3:]] = "sglang/srt/%s:%d" % (rel, node.body[0].lineno)
    return asked, refused


def moe_runners(srt):
    """{choice: runner file} from the ``@register_fused_func("none", choice)`` decorators of layers/moe/moe_runner."""
    out = {}
    for path in sorted((srt / "layers" / "moe" / "moe_runner").glob("*.py")):
        tree = sglang_tree(srt, path.relative_to(srt).as_posix())
        for fn in ast.walk(tree):
            for dec in getattr(fn, "decorator_list", ()):
                if (isinstance(dec, ast.Call) and getattr(dec.func, "id", "") == "register_fused_func"
                        and [a.value for a in dec.args][:1] == ["none"]):
                    out[dec.args[1].value] = path.relative_to(srt).as_posix()
    return out


def imports_in(srt, rel, predicate):
    """[(module, name, line)] of the from-imports in a file whose (module, name) satisfy predicate."""
    tree = sglang_tree(srt, rel)
    return [(n.module, a.name, n.lineno) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
            for a in n.names if predicate(n.module, a.name)]


def sm100_only_word(srt):
    """The line where the release's own MoE override says trtllm-gen MoE kernels are SM100-only."""
    rel = "arg_groups/overrides.py"
    node = find_def(sglang_tree(srt, rel), "_moe_runner_backend_quant_constraints", ast.FunctionDef)
    line = _line_of(node, lambda n: isinstance(n, ast.Constant) and isinstance(n.value, str) and "SM100-only" in n.value)
    return "sglang/srt/%s:%d" % (rel, line)


# ----------------------------------------------------------------------------------------------
# The table, rebuilt

GEMM_FLAG, MOE_FLAG, QUANT_FLAG = "--fp4-gemm-backend", "--moe-runner-backend", "--quantization"
TORCH_CUDA = "13.0"  # SGLang pins flashinfer-python[cu13] and nvidia-cutlass-dsl[cu13]: a CUDA 13 torch
_MOE_ENTRIES = {  # FlashInfer's FP4 MoE entry points and the file that defines them
    "cutlass_fused_moe": "flashinfer/fused_moe/core.py",
    "trtllm_fp4_block_scale_moe": "flashinfer/fused_moe/core.py",
    "trtllm_fp4_block_scale_routed_moe": "flashinfer/fused_moe/core.py",
    "CuteDslMoEWrapper": "flashinfer/fused_moe/cute_dsl/fused_moe.py",
}


def _first(targets, want=None):
    return next(cuda for cuda, target in targets if target and (want is None or target == want))


def flashinfer_facts(version, wheel, sha256, nvcc_first):
    targets = flashinfer_sm120_targets(version)
    modules = {}
    for rel, gen in (("flashinfer/jit/gemm/core.py", cutlass_fp4_gemm_generator(version)),
                     ("flashinfer/jit/fused_moe.py", cutlass_fused_moe_generator(version)),
                     ("flashinfer/jit/fp4_quantization.py", fp4_quantize_generator(version, TORCH_CUDA))):
        spec = jit_module(version, rel, gen)
        nvcc = _first(targets) if spec["arch"] == "context" else nvcc_first[spec["arch"]]
        name = spec.pop("name")
        modules[name] = dict(spec, nvcc=nvcc)
    caps = mm_fp4_capabilities(version)[0]
    frontend, backend = cudnn_fp4_minimums(version)[:2]
    moe_caps, moe_line = class_capabilities(version, "flashinfer/fused_moe/cute_dsl/fused_moe.py", "CuteDslMoEWrapper")
    return {"wheel": wheel, "sha256": sha256, "sm120_targets": targets, "modules": modules,
            "mm_fp4": {b: (120 in c, site) for b, (c, site) in caps.items() if c},
            "cudnn": ("nvidia-cudnn-frontend>=%d.%d" % frontend, "cuDNN backend_version>=%d" % backend),
            "cute_dsl_moe": (120 in moe_caps, "flashinfer/fused_moe/cute_dsl/fused_moe.py:%d" % moe_line),
            "layout": cache_layout(version)}


def _row(release, flag, choice, **kw):
    row = {"release": release, "flag": flag, "choice": choice, "becomes": None, "provider": None, "entry": None,
           "modules": (), "sm120": None, "basis": None, "needs": (), "site": None}
    row.update(kw)
    return row


def release_rows(release, srt, fi_version, fi):
    """The rows of one release, rebuilt from its source and its pinned FlashInfer's facts ``fi``."""
    pins = requires(srt, release)
    dsl = "nvidia-cutlass-dsl==%s" % pins["nvidia-cutlass-dsl"]
    jit_targets, jit_site = sglang_jit_targets(srt)
    sglang_nvcc = _first([(c, t) for c, t in jit_targets if t.endswith(("a", "f"))])
    modules = fi["modules"]
    gemm_module = next(n for n in modules if n.startswith("fp4_gemm_cutlass"))
    moe_module = next(n for n in modules if n.startswith("fused_moe_"))
    quant_module = next(n for n in modules if n.startswith("fp4_quantization_"))

    rows = []
    backend, site = fp4_quantize_use(srt)
    rows.append(_row(release, QUANT_FLAG, "modelopt_fp4", provider="flashinfer-jit", entry="flashinfer.fp4_quantize(backend=%r)" % backend,
                     modules=(quant_module,), sm120=True, basis=modules[quant_module]["generator"],
                     needs=("nvcc>=%s" % modules[quant_module]["nvcc"],), site=site))

    gemm_choices = choices(srt, "FP4_GEMM_RUNNER_BACKEND_CHOICES")[0]
    names = flashinfer_backend_names(srt)
    call = mm_fp4_call(srt)
    for choice in gemm_choices:
        if choice == "auto":
            becomes, site = gemm_auto(srt)
            rows.append(_row(release, GEMM_FLAG, choice, becomes=becomes, site=site))
        elif choice in names:
            fb = names[choice]
            sm120, basis = fi["mm_fp4"][fb]
            kw = {"cudnn": dict(provider="cudnn", needs=fi["cudnn"]),
                  "cutlass": dict(provider="flashinfer-jit", modules=(gemm_module,), needs=("nvcc>=%s" % modules[gemm_module]["nvcc"],)),
                  "cute-dsl": dict(provider="cutlass-dsl", needs=(dsl,)),
                  "trtllm": dict(provider="flashinfer-cubin", needs=("flashinfer-cubin",))}[fb]
            rows.append(_row(release, GEMM_FLAG, choice, entry="flashinfer.mm_fp4(backend=%r)" % fb, sm120=sm120, basis=basis,
                             site=call, **kw))
        elif choice == "marlin":
            entry, site = marlin_linear(srt)
            rows.append(_row(release, GEMM_FLAG, choice, provider="sglang-jit", entry=entry, sm120=True, basis=jit_site,
                             needs=("nvcc>=%s" % sglang_nvcc,), site=site))
        else:
            raise AssertionError("--fp4-gemm-backend %s: no rule to read it" % choice)

    moe_choices = choices(srt, "MOE_RUNNER_BACKEND_CHOICES")[0]
    asked, refused = nvfp4_moe_choices(srt, moe_choices)
    runners = moe_runners(srt)
    trtllm_word = sm100_only_word(srt)
    for choice in sorted(asked):
        if choice == "auto":
            becomes, site = moe_auto(srt)
            rows.append(_row(release, MOE_FLAG, choice, becomes=becomes, site=site))
        elif choice in refused:
            rows.append(_row(release, MOE_FLAG, choice, provider="refused", sm120=False, basis=refused[choice], site=refused[choice]))
        elif choice == "marlin":
            rel = runners[choice]
            (module, name, line), = imports_in(srt, rel, lambda m, n: n == "fused_marlin_moe")
            (kmod, kname, _line), = imports_in(srt, "layers/moe/fused_moe_triton/fused_marlin_moe.py", lambda m, n: "marlin" in n and "gemm" in n)
            rows.append(_row(release, MOE_FLAG, choice, provider="sglang-jit", entry="%s.%s" % (kmod, kname), sm120=True,
                             basis=jit_site, needs=("nvcc>=%s" % sglang_nvcc,), site="sglang/srt/%s:%d" % (rel, line)))
        elif choice in runners:
            rel = runners[choice]
            found = imports_in(srt, rel, lambda m, n: m.startswith("flashinfer") and n in _MOE_ENTRIES)
            assert found, "%s: no FlashInfer FP4 MoE entry imported in %s" % (choice, rel)
            found.sort(key=lambda f: f[2])
            entry = ", ".join("flashinfer.%s" % n for n in sorted({f[1] for f in found}))
            site = "sglang/srt/%s:%d" % (rel, found[0][2])
            name = found[0][1]
            assert flashinfer_defines(fi_version, _MOE_ENTRIES[name], name), name
            if name == "cutlass_fused_moe":
                kw = dict(provider="flashinfer-jit", modules=(moe_module,), sm120=True, basis=modules[moe_module]["generator"],
                          needs=("nvcc>=%s" % modules[moe_module]["nvcc"],))
            elif name == "CuteDslMoEWrapper":
                kw = dict(provider="cutlass-dsl", sm120=fi["cute_dsl_moe"][0], basis=fi["cute_dsl_moe"][1], needs=(dsl,))
            else:  # trtllm-gen: prebuilt cubins; the release's own MoE override calls them SM100-only
                kw = dict(provider="flashinfer-cubin", sm120=False, basis=trtllm_word, needs=("flashinfer-cubin",))
            rows.append(_row(release, MOE_FLAG, choice, entry=entry, site=site, **kw))
        # choices without a plain runner (a2a-bound flashinfer_megamoe, lora_marlin) are left out: see the module
    return rows
