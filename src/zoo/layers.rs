//! Layers shared by the model families, as TensorFlow graphs spell them: fully connected
//! layers, activations, TF1 dropout, LayerNorm and GELU decomposed into primitive ops.

use super::builder::{Net, Rule, T, unary};

/// Fully connected layer without bias: one MatMul over `rows` rows of `fin` features per sample.
pub(crate) fn linear(net: &mut Net, p: &str, x: T, rows: usize, fin: usize, fout: usize) -> T {
    let w = net.param(&format!("{p}/kernel"), fin * fout);
    let flops = 2.0 * (rows * fin * fout) as f64;
    let rule = Rule::Linear {
        dx: "MatMul",
        dw: "MatMul",
        flops,
    };
    let out = (rows * fout) as f64;
    net.op(
        "MatMul",
        format!("{p}/MatMul"),
        &[x, w],
        out,
        true,
        flops,
        rule,
    )
}

/// Fully connected layer: MatMul + BiasAdd over `rows` rows of `fin` features per sample.
pub(crate) fn dense(net: &mut Net, p: &str, x: T, rows: usize, fin: usize, fout: usize) -> T {
    let y = linear(net, p, x, rows, fin, fout);
    let out = (rows * fout) as f64;
    let b = net.param(&format!("{p}/bias"), fout);
    net.op_like(
        "BiasAdd",
        format!("{p}/BiasAdd"),
        &[y, b],
        y,
        out,
        Rule::Bias,
    )
}

/// ReLU on a flat tensor.
pub(crate) fn relu(net: &mut Net, p: &str, x: T) -> T {
    let e = net.elems(x);
    net.op_like(
        "Relu",
        format!("{p}/Relu"),
        &[x],
        x,
        e,
        unary("ReluGrad", false, true, 1.0),
    )
}

/// TF1 `tf.nn.dropout`, or PyTorch's one fused kernel (its backward reads the mask, counted
/// as the output's size); the identity in forward-only graphs (eval mode).
pub(crate) fn dropout(net: &mut Net, p: &str, x: T) -> T {
    if !net.training() {
        return x;
    }
    if net.framework().fuses_layers() {
        let e = net.elems(x);
        let grad = unary("NativeDropoutBackward", false, true, 1.0);
        return net.op_like("NativeDropout", format!("{p}/dropout"), &[x], x, e, grad);
    }
    let e = net.elems(x);
    // random_uniform(shape) * (max - min) + min, then keep_prob + noise.
    let noise = net.op(
        "RandomUniform",
        format!("{p}/random_uniform/RandomUniform"),
        &[],
        e,
        true,
        e,
        Rule::Leaf,
    );
    let noise = net.op_like(
        "Mul",
        format!("{p}/random_uniform/mul"),
        &[noise],
        x,
        e,
        Rule::Identity,
    );
    let noise = net.op_like(
        "AddV2",
        format!("{p}/random_uniform"),
        &[noise],
        x,
        e,
        Rule::Identity,
    );
    let kept = net.op_like("AddV2", format!("{p}/add"), &[noise], x, e, Rule::Identity);
    let mask = net.op_like(
        "Floor",
        format!("{p}/Floor"),
        &[kept],
        x,
        e,
        unary("ZerosLike", false, false, 0.0),
    );
    let scaled = net.op_like(
        "RealDiv",
        format!("{p}/truediv"),
        &[x],
        x,
        e,
        unary("RealDiv", false, false, 1.0),
    );
    net.op_like("Mul", format!("{p}/mul"), &[scaled, mask], x, e, Rule::Mul)
}

/// RMSNorm (Llama's) over the last axis of a `[tokens, hidden]` tensor: `x · rsqrt(mean(x²) + ε)
/// · γ`, one kernel forward and one each for dX and dγ (no framework has it as primitives the
/// zoo's TF1 graphs would spell differently: TensorFlow 1 predates it).
pub(crate) fn rms_norm(net: &mut Net, p: &str, x: T, hidden: usize) -> T {
    let gamma = net.param(&format!("{p}/weight"), hidden);
    let e = net.elems(x);
    let rule = Rule::RmsNorm {
        dx: "RmsNormBackward",
        dgamma: "RmsNormBackwardWeight",
    };
    net.op_like(
        "RmsNorm",
        format!("{p}/RmsNorm"),
        &[x, gamma],
        x,
        4.0 * e,
        rule,
    )
}

/// SiLU (swish), `x · sigmoid(x)`: one kernel; its gradient reads x.
pub(crate) fn silu(net: &mut Net, p: &str, x: T) -> T {
    let e = net.elems(x);
    let grad = unary("SiluBackward", true, false, 6.0);
    net.op_like("Silu", format!("{p}/Silu"), &[x], x, 4.0 * e, grad)
}

/// The elementwise product of two tensors of one shape.
pub(crate) fn mul(net: &mut Net, p: &str, a: T, b: T) -> T {
    let e = net.elems(a);
    net.op_like("Mul", format!("{p}/mul"), &[a, b], a, e, Rule::Mul)
}

/// LayerNorm over the last axis of a `[tokens, hidden]` tensor, as TensorFlow decomposes it or
/// as PyTorch's one `native_layer_norm` kernel (backward: one kernel for dX, one for the
/// parameters' gradients, here one op each).
pub(crate) fn layer_norm(net: &mut Net, p: &str, x: T, tokens: usize, hidden: usize) -> T {
    let gamma = net.param(&format!("{p}/gamma"), hidden);
    let beta = net.param(&format!("{p}/beta"), hidden);
    let e = net.elems(x);
    if net.framework().fuses_layers() {
        let rule = Rule::Norm {
            dx: "NativeLayerNormBackward",
            dgamma: "NativeLayerNormBackwardWeight",
            dbeta: "NativeLayerNormBackwardBias",
        };
        let name = format!("{p}/LayerNorm");
        return net.op_like("NativeLayerNorm", name, &[x, gamma, beta], x, 8.0 * e, rule);
    }
    let rows = tokens as f64;
    let mean = net.op(
        "Mean",
        format!("{p}/moments/mean"),
        &[x],
        rows,
        true,
        e,
        Rule::Mean,
    );
    let sq = net.op_like(
        "SquaredDifference",
        format!("{p}/moments/SquaredDifference"),
        &[x, mean],
        x,
        3.0 * e,
        Rule::SqDiffStopB,
    );
    let var = net.op(
        "Mean",
        format!("{p}/moments/variance"),
        &[sq],
        rows,
        true,
        e,
        Rule::Mean,
    );
    let var_eps = net.op_like(
        "AddV2",
        format!("{p}/batchnorm/add"),
        &[var],
        var,
        rows,
        Rule::Identity,
    );
    let rstd = net.op_like(
        "Rsqrt",
        format!("{p}/batchnorm/Rsqrt"),
        &[var_eps],
        var,
        rows,
        unary("RsqrtGrad", false, true, 3.0),
    );
    let scale = net.op_like(
        "Mul",
        format!("{p}/batchnorm/mul"),
        &[rstd, gamma],
        x,
        e,
        Rule::Mul,
    );
    let x_scaled = net.op_like(
        "Mul",
        format!("{p}/batchnorm/mul_1"),
        &[x, scale],
        x,
        e,
        Rule::Mul,
    );
    let m_scaled = net.op_like(
        "Mul",
        format!("{p}/batchnorm/mul_2"),
        &[mean, scale],
        x,
        e,
        Rule::Mul,
    );
    let shift = net.op_like(
        "Sub",
        format!("{p}/batchnorm/sub"),
        &[beta, m_scaled],
        x,
        e,
        Rule::Sub,
    );
    net.op_like(
        "AddV2",
        format!("{p}/batchnorm/add_1"),
        &[x_scaled, shift],
        x,
        e,
        Rule::Add,
    )
}

/// `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`, as eight TensorFlow ops or one
/// PyTorch kernel.
pub(crate) fn gelu(net: &mut Net, p: &str, x: T) -> T {
    let e = net.elems(x);
    if net.framework().fuses_layers() {
        let grad = unary("GeluBackward", true, false, 8.0);
        return net.op_like("Gelu", format!("{p}/Gelu"), &[x], x, 8.0 * e, grad);
    }
    let cube = net.op_like(
        "Pow",
        format!("{p}/Pow"),
        &[x],
        x,
        2.0 * e,
        unary("Mul", true, false, 3.0),
    );
    let c = net.op_like(
        "Mul",
        format!("{p}/mul"),
        &[cube],
        x,
        e,
        unary("Mul", false, false, 1.0),
    );
    let inner = net.op_like("AddV2", format!("{p}/add"), &[x, c], x, e, Rule::Add);
    let scaled = net.op_like(
        "Mul",
        format!("{p}/mul_1"),
        &[inner],
        x,
        e,
        unary("Mul", false, false, 1.0),
    );
    let th = net.op_like(
        "Tanh",
        format!("{p}/Tanh"),
        &[scaled],
        x,
        4.0 * e,
        unary("TanhGrad", false, true, 2.0),
    );
    let one_plus = net.op_like("AddV2", format!("{p}/add_1"), &[th], x, e, Rule::Identity);
    let cdf = net.op_like(
        "Mul",
        format!("{p}/mul_2"),
        &[one_plus],
        x,
        e,
        unary("Mul", false, false, 1.0),
    );
    net.op_like("Mul", format!("{p}/mul_3"), &[x, cdf], x, e, Rule::Mul)
}

pub(crate) fn reshape(net: &mut Net, p: &str, x: T) -> T {
    net.op_like(
        "Reshape",
        format!("{p}/Reshape"),
        &[x],
        x,
        0.0,
        unary("Reshape", false, false, 0.0),
    )
}

pub(crate) fn transpose(net: &mut Net, p: &str, x: T) -> T {
    net.op_like(
        "Transpose",
        format!("{p}/transpose"),
        &[x],
        x,
        0.0,
        unary("Transpose", false, false, 0.0),
    )
}

/// Elementwise sum of two tensors of the same shape (residual connections).
pub(crate) fn add(net: &mut Net, p: &str, a: T, b: T) -> T {
    let e = net.elems(a);
    net.op_like("AddV2", format!("{p}/add"), &[a, b], a, e, Rule::Add)
}
