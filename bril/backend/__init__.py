"""Native code: lowering to LLVM IR, compiling, and the JIT that runs hot regions natively."""
